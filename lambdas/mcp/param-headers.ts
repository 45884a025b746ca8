import type { KeyField } from '../core/result-contract';

/**
 * MCP 2026-07-28 tool-parameter headers (SEP-2243, Streamable HTTP "Custom Headers from Tool Parameters"): a tool
 * marks an argument with `x-mcp-header: <Name>` in its inputSchema, a client sends the argument's value again as the
 * HTTP header `Mcp-Param-<Name>` (Base64-wrapped `=?base64?…?=` when it is not plain ASCII), and a server that
 * reads the body rejects a call whose header and argument disagree, or whose header is missing while the argument is
 * there: 400 Bad Request, JSON-RPC -32020 (HeaderMismatch). These are the same rules the v2 SDK's `McpServer`
 * applies (the SDK does not export its functions, so the low-level server here applies them itself).
 */

export const X_MCP_HEADER = 'x-mcp-header';
export const MCP_PARAM_HEADER_PREFIX = 'Mcp-Param-';
/** JSON-RPC HeaderMismatch: a header disagrees with the body, or one the body requires is missing or malformed. */
export const HEADER_MISMATCH = -32020;

/**
 * The header each key argument is mirrored into: `Mcp-Param-Idempotency-Key` and `Mcp-Param-Operation-Id`, so that
 * a load balancer, gateway or WAF can see (route, rate-limit, log) the business key without parsing the body.
 */
export const KEY_HEADER_NAMES: Readonly<Record<KeyField, string>> = { idempotency_key: 'Idempotency-Key', operation_id: 'Operation-Id' };

/** One argument an inputSchema marks for mirroring: where it sits (a chain of `properties` keys) and its header. */
export interface ParamHeaderDeclaration {
  readonly path: readonly string[];
  /** The `x-mcp-header` value: the header is `Mcp-Param-<headerName>`. */
  readonly headerName: string;
  readonly type: string | undefined;
}

/** The declarations of an inputSchema, or the first constraint it breaks (a conforming client then drops the tool). */
export type ParamHeaderScan =
  | { valid: true; declarations: readonly ParamHeaderDeclaration[] }
  | { valid: false; reason: string; declarations?: readonly ParamHeaderDeclaration[] };

/** RFC 9110 `token` (1*tchar): no empty name, space, control character or delimiter. */
const TOKEN = /^[!#$%&'*+\-.^_`|~0-9A-Za-z]+$/;
const PRIMITIVE_TYPES = new Set(['string', 'integer', 'boolean']);
/** Keywords whose subschemas are not "statically reachable" through `properties` alone: no declaration may sit there. */
const UNREACHABLE = [
  'items',
  'prefixItems',
  'contains',
  'additionalProperties',
  'unevaluatedProperties',
  'unevaluatedItems',
  'propertyNames',
  'patternProperties',
  'dependentSchemas',
  'oneOf',
  'anyOf',
  'allOf',
  'not',
  'if',
  'then',
  'else',
  '$defs',
  'definitions',
] as const;
const NAME_TO_SCHEMA = new Set<string>(['patternProperties', 'dependentSchemas', '$defs', 'definitions']);

const pathName = (path: readonly string[]) => (path.length === 0 ? '<root>' : path.join('.'));

/**
 * Reads the `x-mcp-header` declarations of a tool's JSON inputSchema and checks the spec's constraints on them:
 * a non-empty RFC 9110 token, case-insensitively unique, on a string, integer or boolean property reachable from the
 * root through `properties` only. A `number` property is refused but still checked (as the SDK does).
 */
export function scanParamHeaders(inputSchema: unknown): ParamHeaderScan {
  const declarations: ParamHeaderDeclaration[] = [];
  const seen = new Map<string, string>();
  let numberFault: string | undefined;
  const visit = (node: unknown, path: string[], reachable: boolean): string | undefined => {
    if (node === null || typeof node !== 'object') return undefined;
    const schema = node as Record<string, unknown>;
    if (X_MCP_HEADER in schema) {
      if (!reachable || path.length === 0)
        return `${pathName(path)}: x-mcp-header is only permitted on properties reachable from the root through 'properties' alone`;
      const name = schema[X_MCP_HEADER];
      if (typeof name !== 'string' || name.length === 0) return `${pathName(path)}: x-mcp-header must be a non-empty string`;
      if (!TOKEN.test(name))
        return `${pathName(path)}: x-mcp-header '${name}' is not an RFC 9110 token (no spaces, control characters or delimiters)`;
      const type = typeof schema.type === 'string' ? schema.type : undefined;
      if (type === undefined || !PRIMITIVE_TYPES.has(type)) {
        const fault = `${pathName(path)}: x-mcp-header is only permitted on string, integer or boolean properties; got ${type ?? 'no type'}`;
        if (type !== 'number') return fault;
        numberFault ??= fault;
      }
      const prior = seen.get(name.toLowerCase());
      if (prior !== undefined) return `x-mcp-header '${name}' is not case-insensitively unique (also declared as '${prior}')`;
      seen.set(name.toLowerCase(), name);
      declarations.push({ path, headerName: name, type });
    }
    const properties = schema.properties;
    if (properties !== null && typeof properties === 'object')
      for (const [key, child] of Object.entries(properties)) {
        const fault = visit(child, [...path, key], reachable);
        if (fault !== undefined) return fault;
      }
    for (const keyword of UNREACHABLE) {
      const sub = schema[keyword];
      if (sub === undefined) continue;
      const branches = Array.isArray(sub)
        ? sub
        : sub !== null && typeof sub === 'object' && NAME_TO_SCHEMA.has(keyword)
          ? Object.values(sub)
          : [sub];
      for (const branch of branches) {
        const fault = visit(branch, [...path, `<${keyword}>`], false);
        if (fault !== undefined) return fault;
      }
    }
    return undefined;
  };
  const fault = visit(inputSchema, [], true);
  if (fault !== undefined) return { valid: false, reason: numberFault ?? fault };
  return numberFault === undefined ? { valid: true, declarations } : { valid: false, reason: numberFault, declarations };
}

const SENTINEL_PREFIX = '=?base64?';
const SENTINEL_SUFFIX = '?=';
const CANONICAL_BASE64 = /^(?:[A-Za-z0-9+/]{4})*(?:[A-Za-z0-9+/]{2}==|[A-Za-z0-9+/]{3}=)?$/;
const DECIMAL = /^-?\d+(\.\d+)?$/;
/** Visible ASCII, space and horizontal tab: what a plain header value may hold. */
const FIELD_VALUE = /^[\t\x20-\x7e]*$/;

/**
 * A header value as the client meant it: `=?base64?…?=` (case-sensitive markers) is the Base64 of the value's UTF-8;
 * anything else is the value itself. Undefined for a sentinel whose payload is not canonical Base64 or not UTF-8.
 */
export function decodeParamHeaderValue(value: string): string | undefined {
  if (!(value.startsWith(SENTINEL_PREFIX) && value.endsWith(SENTINEL_SUFFIX))) return value;
  const payload = value.slice(SENTINEL_PREFIX.length, value.length - SENTINEL_SUFFIX.length);
  if (!CANONICAL_BASE64.test(payload)) return undefined;
  try {
    return new TextDecoder('utf-8', { fatal: true }).decode(Buffer.from(payload, 'base64'));
  } catch {
    return undefined;
  }
}

/** The string a client puts in the header for an argument value (spec "Type conversion"); undefined: no header. */
function headerText(value: unknown): string | undefined {
  if (typeof value === 'string') return value;
  if (typeof value === 'boolean') return value ? 'true' : 'false';
  if (typeof value === 'number' && Number.isFinite(value) && (!Number.isInteger(value) || Number.isSafeInteger(value)))
    return String(value);
  return undefined;
}

function valueAt(root: unknown, path: readonly string[]): unknown {
  let node = root;
  for (const key of path) {
    if (node === null || typeof node !== 'object') return undefined;
    node = (node as Record<string, unknown>)[key];
  }
  return node;
}

/** Why a call's headers and arguments disagree. Holds the values only for hashing into logs: never echo them. */
export interface ParamHeaderMismatch {
  /** `Mcp-Param-<Name>`. */
  header: string;
  /** The argument's path in `arguments` (`idempotency_key`). */
  argument: string;
  problem: 'missing' | 'invalid-characters' | 'invalid-encoding' | 'mismatch';
  /** The argument's value as header text. */
  bodyValue: string;
  /** The header's value, decoded when it decodes. */
  headerValue?: string;
}

/**
 * Checks a `tools/call`'s `Mcp-Param-*` headers against its arguments, declaration by declaration: an argument that
 * is present (not null) needs its header, and the header, decoded, must equal the argument's text (integers compared
 * as numbers). A header whose argument is absent or null is not looked at. Undefined when every declaration holds.
 */
export function checkParamHeaders(
  declarations: readonly ParamHeaderDeclaration[],
  args: unknown,
  headers: Headers,
): ParamHeaderMismatch | undefined {
  for (const declaration of declarations) {
    const header = `${MCP_PARAM_HEADER_PREFIX}${declaration.headerName}`;
    const argument = pathName(declaration.path);
    const raw = valueAt(args, declaration.path);
    if (raw === undefined || raw === null) continue;
    const bodyValue = headerText(raw);
    // An object, an array or an unsafe integer has no header form: the tool's own validation refuses it.
    if (bodyValue === undefined) continue;
    const sent = headers.get(header);
    if (sent === null) return { header, argument, problem: 'missing', bodyValue };
    // RFC 9110 field-value characters only; anything else had to come Base64-wrapped. (The SDK's McpServer 2.4.0
    // compares such a value as it is; the spec says to refuse it.)
    if (!FIELD_VALUE.test(sent)) return { header, argument, problem: 'invalid-characters', bodyValue };
    const headerValue = decodeParamHeaderValue(sent);
    if (headerValue === undefined) return { header, argument, problem: 'invalid-encoding', bodyValue };
    const numeric =
      (declaration.type === 'integer' || declaration.type === 'number') && typeof raw === 'number' && DECIMAL.test(headerValue);
    if (numeric ? Number(headerValue) !== raw : headerValue !== bodyValue)
      return { header, argument, problem: 'mismatch', bodyValue, headerValue };
  }
  return undefined;
}

/** The sentence a refused call is answered with; it names the header and the argument, never their values. */
export function describeParamHeaderMismatch({ header, argument, problem }: ParamHeaderMismatch): string {
  switch (problem) {
    case 'missing':
      return `the body carries ${argument} but the ${header} header is absent`;
    case 'invalid-characters':
      return `the ${header} header holds characters a header value may not carry (send them Base64-wrapped: =?base64?…?=)`;
    case 'invalid-encoding':
      return `the ${header} header carries an invalid Base64 sentinel value`;
    case 'mismatch':
      return `the ${header} header does not match ${argument} in the body`;
  }
}
