import { describe, expect, it } from 'vitest';
import * as z from 'zod';
import { defineWriteTool } from './define-write-tool';
import { checkParamHeaders, decodeParamHeaderValue, KEY_HEADER_NAMES, scanParamHeaders } from './param-headers';

/** MCP 2026-07-28, Streamable HTTP, "Custom Headers from Tool Parameters": the rules as pure functions. */

const schema = (properties: Record<string, unknown>, extra: Record<string, unknown> = {}) => ({ type: 'object', properties, ...extra });
const reasonOf = (input: unknown) => {
  const scan = scanParamHeaders(input);
  return scan.valid ? undefined : scan.reason;
};

describe('x-mcp-header declarations', () => {
  it("finds them at any depth of 'properties', with their header names and types", () => {
    const scan = scanParamHeaders(
      schema({
        region: { type: 'string', 'x-mcp-header': 'Region' },
        nested: schema({ count: { type: 'integer', 'x-mcp-header': 'Count' } }),
        other: { type: 'string' },
      }),
    );
    expect(scan).toEqual({
      valid: true,
      declarations: [
        { path: ['region'], headerName: 'Region', type: 'string' },
        { path: ['nested', 'count'], headerName: 'Count', type: 'integer' },
      ],
    });
  });

  it.each([
    ['an empty name', schema({ a: { type: 'string', 'x-mcp-header': '' } }), /non-empty/],
    ['a space', schema({ a: { type: 'string', 'x-mcp-header': 'My Region' } }), /RFC 9110 token/],
    ['a colon', schema({ a: { type: 'string', 'x-mcp-header': 'Region:Primary' } }), /RFC 9110 token/],
    ['a CR/LF', schema({ a: { type: 'string', 'x-mcp-header': 'A\r\nB' } }), /RFC 9110 token/],
    [
      'the same name twice, another case',
      schema({ a: { type: 'string', 'x-mcp-header': 'Region' }, b: { type: 'string', 'x-mcp-header': 'REGION' } }),
      /case-insensitively unique/,
    ],
    ['an object property', schema({ a: { type: 'object', 'x-mcp-header': 'A' } }), /string, integer or boolean/],
    ['a number property', schema({ a: { type: 'number', 'x-mcp-header': 'A' } }), /got number/],
    [
      'a property under items',
      schema({ list: { type: 'array', items: schema({ a: { type: 'string', 'x-mcp-header': 'A' } }) } }),
      /reachable/,
    ],
    ['a property under anyOf', schema({}, { anyOf: [schema({ a: { type: 'string', 'x-mcp-header': 'A' } })] }), /reachable/],
    ['the root', { type: 'object', 'x-mcp-header': 'A' }, /reachable/],
  ])('refuses %s', (_what, input, reason) => {
    expect(reasonOf(input)).toMatch(reason);
  });

  it("allows a name like a standard header's (it becomes Mcp-Param-Method, not Mcp-Method)", () => {
    expect(scanParamHeaders(schema({ a: { type: 'string', 'x-mcp-header': 'Method' } })).valid).toBe(true);
  });

  it('every write tool declares its key: Idempotency-Key, or Operation-Id for server-issued ids', () => {
    const spec = {
      title: 'T',
      description: 'D',
      input: { label: z.string() },
      result: z.object({}),
      annotations: { destructiveHint: false, openWorldHint: false },
      execute: async () => ({ result: {} }),
    };
    for (const [keySource, field] of [
      ['client', 'idempotency_key'],
      ['operation_id', 'operation_id'],
    ] as const) {
      const tool = defineWriteTool({ ...spec, name: `t_${keySource}`, keySource });
      const json = z.toJSONSchema(tool.inputSchema, { io: 'input', target: 'draft-7' });
      expect(scanParamHeaders(json)).toEqual({
        valid: true,
        declarations: [{ path: [field], headerName: KEY_HEADER_NAMES[field], type: 'string' }],
      });
    }
  });
});

describe('header values', () => {
  it.each([
    ['us-west1', 'us-west1'],
    ['=?base64?SGVsbG8sIOS4lueVjA==?=', 'Hello, 世界'],
    ['=?base64?IHBhZGRlZCA=?=', ' padded '],
    ['=?base64?bGluZTEKbGluZTI=?=', 'line1\nline2'],
    ['=?base64?PT9iYXNlNjQ/bGl0ZXJhbD89?=', '=?base64?literal?='],
  ])("decode as the spec's table says: %s is %j", (header, value) => {
    expect(decodeParamHeaderValue(header)).toBe(value);
  });

  it('a sentinel with non-canonical Base64 or bytes that are not UTF-8 does not decode; other markers are plain text', () => {
    expect(decodeParamHeaderValue('=?base64?YQ?=')).toBeUndefined();
    expect(decodeParamHeaderValue('=?base64?SGVsbG8*?=')).toBeUndefined();
    expect(decodeParamHeaderValue(`=?base64?${Buffer.from([0xff, 0xfe]).toString('base64')}?=`)).toBeUndefined();
    expect(decodeParamHeaderValue('=?BASE64?YWJj?=')).toBe('=?BASE64?YWJj?=');
  });
});

describe('a call against its declarations', () => {
  const declarations = [
    { path: ['key'], headerName: 'Key', type: 'string' },
    { path: ['n'], headerName: 'N', type: 'integer' },
    { path: ['flag'], headerName: 'Flag', type: 'boolean' },
  ] as const;
  const check = (args: Record<string, unknown>, headers: Record<string, string>) =>
    checkParamHeaders(declarations, args, new Headers(headers))?.problem;

  it('holds when every present argument has its header, whatever the header name case', () => {
    expect(
      check({ key: 'k', n: 42, flag: false }, { 'mcp-param-key': 'k', 'MCP-PARAM-N': '42', 'Mcp-Param-Flag': 'false' }),
    ).toBeUndefined();
  });

  it('needs no header for an absent or null argument, and does not read one sent for it', () => {
    expect(check({ key: null }, {})).toBeUndefined();
    expect(check({}, { 'Mcp-Param-Key': 'anything' })).toBeUndefined();
  });

  it('refuses a missing, a different, a badly wrapped or a non-ASCII plain header', () => {
    expect(check({ key: 'k' }, {})).toBe('missing');
    expect(check({ key: 'k' }, { 'Mcp-Param-Key': 'K' })).toBe('mismatch');
    expect(check({ key: 'k' }, { 'Mcp-Param-Key': '=?base64?a?=' })).toBe('invalid-encoding');
    expect(check({ key: 'ü' }, { 'Mcp-Param-Key': 'ü' })).toBe('invalid-characters');
    expect(check({ flag: true }, { 'Mcp-Param-Flag': 'True' })).toBe('mismatch');
  });

  it('compares integers as numbers (42.0 is 42), strings as strings', () => {
    expect(check({ n: 42 }, { 'Mcp-Param-N': '42.0' })).toBeUndefined();
    expect(check({ n: 42 }, { 'Mcp-Param-N': '042' })).toBeUndefined();
    expect(check({ n: 42 }, { 'Mcp-Param-N': '4.2e1' })).toBe('mismatch');
    expect(check({ key: '42' }, { 'Mcp-Param-Key': '42.0' })).toBe('mismatch');
  });
});
