import { ConfigError, type EnvVar } from 'idempotent-mcp/lambda';

/**
 * The few kinds of variable the reference endpoint's own settings need, declared as the toolkit declares its own
 * (`EnvVar`: read with `read`, written with `environmentFor`). A bad value fails the cold start with a ConfigError naming
 * the variable, as the toolkit's own do.
 */
const trimmed = (raw: string | undefined) => raw?.trim() || undefined;

export function text(name: string): EnvVar<string | undefined>;
export function text(name: string, fallback: string): EnvVar<string>;
export function text(name: string, fallback?: string): EnvVar<string | undefined> {
  return { name, parse: (raw) => trimmed(raw) ?? fallback, format: String };
}

export const httpUrl = (name: string): EnvVar<string | undefined> => ({
  name,
  parse: (raw) => {
    const value = trimmed(raw)?.replace(/\/+$/, '');
    if (value !== undefined && !/^https?:\/\/[^\s]+$/.test(value)) throw new ConfigError(`${name} must be an http(s) URL`);
    return value;
  },
  format: String,
});

export const oneOf = <T extends string>(name: string, allowed: readonly T[], fallback: T): EnvVar<T> => ({
  name,
  parse: (raw) => {
    const value = trimmed(raw) ?? fallback;
    if (!(allowed as readonly string[]).includes(value))
      throw new ConfigError(`${name} must be ${allowed.map((a) => `'${a}'`).join(' or ')} (got '${value}')`);
    return value as T;
  },
  format: String,
});

/** Settings by declared name. */
export type SettingsOf<V extends Record<string, EnvVar<unknown>>> = { [K in keyof V]?: NonNullable<ReturnType<V[K]['parse']>> };

/** A function's environment from typed settings of `variables` (unset ones are left out). */
export function environmentFor<V extends Record<string, EnvVar<unknown>>>(variables: V, settings: SettingsOf<V>): Record<string, string> {
  return Object.fromEntries(
    Object.entries(settings)
      .filter(([, value]) => value !== undefined)
      .map(([key, value]) => [variables[key]!.name, variables[key]!.format(value as NonNullable<unknown>)]),
  );
}
