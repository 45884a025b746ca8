/**
 * One environment variable as a typed declaration (`EnvVar`): its name, how its text is read with its default, and how
 * a value is written; the parsers the declarations are made of; reading one (`read`) and writing an environment from
 * typed settings (`environmentFor`). The toolkit's own variables are declared once, in config.ts (`EnvVars`).
 */

/**
 * An environment: variable names to their text (`process.env`).
 * @public
 */
export type Env = Record<string, string | undefined>;

/**
 * A setting is missing or malformed: its message names the variable, and the cold start fails with it.
 * @public
 */
export class ConfigError extends Error {
  constructor(message: string) {
    super(message);
    this.name = 'ConfigError';
  }
}

/**
 * One environment variable: its name, how its text is read (with its default), and how a value is written. The
 * constructs write environments only through `environmentOf` and the functions read them only through `read`, both
 * from `EnvVars` below: a renamed or retyped variable fails the type check on both sides.
 * @public
 */
export interface EnvVar<T> {
  /** The variable's name in the environment (`TABLE_NAME`). */
  readonly name: string;
  /** The value, its default when unset (or blank), or a ConfigError naming the variable. */
  parse(raw: string | undefined): T;
  /** A value as the variable's text, as `parse` reads it back. */
  format(value: NonNullable<T>): string;
}

const trimmed = (raw: string | undefined) => {
  const value = raw?.trim();
  return value ? value : undefined;
};

/** @public */
export function text(name: string): EnvVar<string | undefined>;
/** @public */
export function text(name: string, fallback: string): EnvVar<string>;
export function text(name: string, fallback?: string): EnvVar<string | undefined> {
  return { name, parse: (raw) => trimmed(raw) ?? fallback, format: String };
}

export function httpUrl(name: string): EnvVar<string | undefined> {
  return {
    name,
    parse: (raw) => {
      const value = trimmed(raw)?.replace(/\/+$/, '');
      if (value !== undefined && !/^https?:\/\/[^\s]+$/.test(value)) throw new ConfigError(`${name} must be an http(s) URL`);
      return value;
    },
    format: String,
  };
}

export function positiveInt(name: string, fallback: number, max: number): EnvVar<number> {
  return {
    name,
    parse: (raw) => {
      const value = trimmed(raw);
      if (value === undefined) return fallback;
      const n = Number(value);
      if (!Number.isInteger(n) || n <= 0 || n > max)
        throw new ConfigError(`${name} must be a whole number from 1 to ${max} (got '${value}')`);
      return n;
    },
    format: (value) => String(value),
  };
}

export function oneOf<T extends string>(name: string, allowed: readonly T[], fallback: T): EnvVar<T> {
  return {
    name,
    parse: (raw) => {
      const value = trimmed(raw) ?? fallback;
      if (!(allowed as readonly string[]).includes(value))
        throw new ConfigError(`${name} must be ${allowed.map((a) => `'${a}'`).join(' or ')} (got '${value}')`);
      return value as T;
    },
    format: String,
  };
}

export function flag(name: string): EnvVar<boolean> {
  return { name, parse: (raw) => trimmed(raw) === 'true', format: (value) => String(value) };
}

/**
 * Comma-separated, each item normalized (blank items dropped).
 */
export function commaList(name: string, normalize: (item: string) => string = (item) => item): EnvVar<string[]> {
  return {
    name,
    parse: (raw) =>
      (trimmed(raw) ?? '')
        .split(',')
        .map((item) => normalize(item.trim()))
        .filter(Boolean),
    format: (value) => value.join(','),
  };
}

/** Comma-separated; trailing slashes of origins are dropped. */
export const originList = (name: string) => commaList(name, (origin) => origin.replace(/\/+$/, ''));

const SCOPE_TOKEN = /^[\x21\x23-\x5b\x5d-\x7e]+$/;

/** Space-separated OAuth scopes (RFC 6749 §3.3); unset (or blank) leaves the default to the auth mode. */
export function scopeList(name: string): EnvVar<string[] | undefined> {
  return {
    name,
    parse: (raw) => {
      const value = trimmed(raw);
      if (value === undefined) return undefined;
      const list = value.split(' ').filter(Boolean);
      const bad = list.find((scope) => !SCOPE_TOKEN.test(scope));
      if (bad !== undefined)
        throw new ConfigError(`${name} must be space-separated scopes without quotes or backslashes (got '${bad.slice(0, 40)}')`);
      return [...new Set(list)];
    },
    format: (value) => value.join(' '),
  };
}

/**
 * Settings by declared name for any record of variables (an endpoint's own, like the reference endpoint's).
 */
export type SettingsOf<V extends Record<string, EnvVar<unknown>>> = { [K in keyof V]?: NonNullable<ReturnType<V[K]['parse']>> };

/**
 * A function's environment from typed settings of `variables` (unset ones are left out).
 */
export function environmentFor<V extends Record<string, EnvVar<unknown>>>(variables: V, settings: SettingsOf<V>): Record<string, string> {
  const environment: Record<string, string> = {};
  for (const [key, value] of Object.entries(settings)) {
    if (value === undefined) continue;
    const variable = variables[key] as EnvVar<unknown>;
    environment[variable.name] = variable.format(value as NonNullable<unknown>);
  }
  return environment;
}

/**
 * A declared variable's value from an environment record.
 *
 * @public
 */
export const read = <T>(env: Env, variable: EnvVar<T>): T => variable.parse(env[variable.name]);

export function required<T>(env: Env, variable: EnvVar<T | undefined>): T {
  const value = read(env, variable);
  if (value === undefined) throw new ConfigError(`${variable.name} must be set`);
  return value;
}
