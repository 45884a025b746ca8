import { expect, it } from 'vitest';
import { checkPolicyAgainstUpstream, GatewayPolicyError, judgeLookup, parseGatewayPolicy, prepareLookup } from './policy';

const mistakes = (input: unknown): readonly string[] => {
  try {
    parseGatewayPolicy(input);
  } catch (err) {
    if (err instanceof GatewayPolicyError) return err.mistakes;
    throw err;
  }
  return [];
};

it('names the tool and the field of every mistake, one sentence each', () => {
  expect(
    mistakes({
      tools: {
        edit_file: { kind: 'write', timeout: 5 },
        move_file: { kind: 'writ' },
      },
    }).toSorted(),
  ).toEqual([
    'tool edit_file: field inFlightWindowMs is required (how long the upstream may still apply a call after the gateway gave up on it, in ms)',
    'tool edit_file: unknown field timeout (a write tool takes kind, key, fingerprint, timeoutMs, inFlightWindowMs, confirmation, summary, reconcile, retentionSeconds)',
    'tool move_file: field kind must be "write" or "read"',
  ]);
  expect(mistakes({ tools: { create: { kind: 'write', inFlightWindowMs: 0, reconcile: { tool: 'read', arguments: { path: '{{ bad path }}' }, found: {} } } } })).toEqual([
    'tool create: field reconcile.arguments: {{bad path}} is not an argument path (write {{name}}, {{name.0.field}} or {{$key}})',
    'tool create: field reconcile.found is empty: say what in the lookup\'s answer shows the effect (textEquals, textIncludes, structured)',
  ]);
  expect(mistakes({ tools: { read_text_file: { kind: 'read' } } })).toEqual([]);
});

it('checks the policy against the upstream tools: names, key, excluded fields, the lookup and its arguments', () => {
  const policy = parseGatewayPolicy({
    tools: {
      edit_file: { kind: 'write', inFlightWindowMs: 1000, key: { argument: 'ref' }, fingerprint: { exclude: ['trace'] }, reconcile: { tool: 'read_text_file', arguments: { file: '{{paths}}' }, found: { textIncludes: 'x' } } },
      gone: { kind: 'read' },
    },
  });
  const upstream = [
    { name: 'edit_file', inputSchema: { properties: { path: { type: 'string' }, idempotency_key: { type: 'string' } }, required: ['path'] } },
    { name: 'read_text_file', inputSchema: { properties: { path: { type: 'string' } }, required: ['path'] } },
  ];
  expect(checkPolicyAgainstUpstream(policy, upstream)).toEqual([
    'tool edit_file: field key.argument: the upstream tool has no argument ref (it has path, idempotency_key)',
    'tool edit_file: the upstream tool has its own argument idempotency_key, which the gateway adds: name it as the key ({ "argument": "idempotency_key" }) or leave the tool out',
    'tool edit_file: field fingerprint.exclude: the upstream tool has no argument trace',
    'tool edit_file: field reconcile.arguments: {{paths}} names no argument of edit_file (it has path, idempotency_key)',
    'tool edit_file: field reconcile.arguments: read_text_file has no argument file (it has path)',
    'tool edit_file: field reconcile.arguments: read_text_file requires path, which is not given',
    'tool gone: the upstream lists no tool of that name (it lists edit_file, read_text_file)',
  ]);
});

it('fills a lookup from the call and reads its answer: found, absent, or undecided', () => {
  const lookup = prepareLookup(
    { tool: 'open_nodes', arguments: { names: ['{{entities.0.name}}'] }, found: { structured: { field: 'entities.0.name', equals: '{{entities.0.name}}' } } },
    { args: { entities: [{ name: 'alice' }] }, key: 'k-12345678' },
  )!;
  expect(lookup.arguments).toEqual({ names: ['alice'] });
  expect(judgeLookup(lookup, { structuredContent: { entities: [{ name: 'alice' }] } })).toBe('found');
  expect(judgeLookup(lookup, { structuredContent: { entities: [] } })).toBe('absent');
  expect(judgeLookup(lookup, { isError: true, content: [{ type: 'text', text: 'boom' }] })).toBe('undecided');
  // A call without the argument a template names cannot be checked.
  expect(prepareLookup({ tool: 'open_nodes', arguments: { names: ['{{entities.0.name}}'] }, found: { textIncludes: 'x' } }, { args: {}, key: 'k' })).toBeUndefined();
});

it("refuses {{$key}} in a summary: the person is shown the call's arguments, the key is not among them", () => {
  expect(mistakes({ tools: { echo: { kind: 'write', inFlightWindowMs: 0, confirmation: 'approval', summary: 'Approve {{message}} ({{$key}})' } } })).toEqual([
    'tool echo: field summary: {{$key}} cannot be shown in a summary (the person approves the arguments: name them, {{name}})',
  ]);
  expect(mistakes({ tools: { echo: { kind: 'write', inFlightWindowMs: 0, confirmation: 'approval', summary: 'Approve {{message}}' } } })).toEqual([]);
});
