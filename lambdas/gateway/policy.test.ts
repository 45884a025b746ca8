import { expect, it } from 'vitest';
import { judgeLookup, prepareLookup } from './lookup';
import { checkGatewayPolicy, checkPolicyAgainstUpstream, fillSummary, GatewayPolicyError, parseGatewayPolicy } from './policy';

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
  expect(
    mistakes({
      tools: {
        create: { kind: 'write', inFlightWindowMs: 0, reconcile: { tool: 'read', arguments: { path: '{{ bad path }}' }, found: {} } },
        read: { kind: 'read' },
      },
    }),
  ).toEqual([
    'tool create: field reconcile.arguments: {{bad path}} is not an argument path (write {{name}}, {{name.0.field}} or {{$key}})',
    "tool create: field reconcile.found is empty: say what in the lookup's answer shows the effect (textEquals, textIncludes, structured)",
  ]);
  expect(mistakes({ tools: { read_text_file: { kind: 'read' } } })).toEqual([]);
});

it('checks the policy against the upstream tools: names, key, excluded fields, the lookup and its arguments', () => {
  const policy = parseGatewayPolicy({
    tools: {
      edit_file: {
        kind: 'write',
        inFlightWindowMs: 1000,
        key: { argument: 'ref' },
        fingerprint: { exclude: ['trace'] },
        reconcile: { tool: 'read_text_file', arguments: { file: '{{paths}}' }, found: { textIncludes: 'x' } },
      },
      read_text_file: { kind: 'read' },
      gone: { kind: 'read' },
    },
  });
  const upstream = [
    {
      name: 'edit_file',
      inputSchema: { properties: { path: { type: 'string' }, idempotency_key: { type: 'string' } }, required: ['path'] },
    },
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
    {
      tool: 'open_nodes',
      arguments: { names: ['{{entities.0.name}}'] },
      found: { structured: { field: 'entities.0.name', equals: '{{entities.0.name}}' } },
    },
    { args: { entities: [{ name: 'alice' }] }, key: 'k-12345678' },
  )!;
  expect(lookup.arguments).toEqual({ names: ['alice'] });
  expect(judgeLookup(lookup, { structuredContent: { entities: [{ name: 'alice' }] } })).toBe('found');
  expect(judgeLookup(lookup, { structuredContent: { entities: [] } })).toBe('absent');
  expect(judgeLookup(lookup, { isError: true, content: [{ type: 'text', text: 'boom' }] })).toBe('undecided');
  // A call without the argument a template names cannot be checked.
  expect(
    prepareLookup(
      { tool: 'open_nodes', arguments: { names: ['{{entities.0.name}}'] }, found: { textIncludes: 'x' } },
      { args: {}, key: 'k' },
    ),
  ).toBeUndefined();
});

it("refuses {{$key}} in a summary: the person is shown the call's arguments, the key is not among them", () => {
  expect(
    mistakes({
      tools: { echo: { kind: 'write', inFlightWindowMs: 0, confirmation: 'approval', summary: 'Approve {{message}} ({{$key}})' } },
    }),
  ).toEqual(['tool echo: field summary: {{$key}} cannot be shown in a summary (the person approves the arguments: name them, {{name}})']);
  expect(
    mistakes({ tools: { echo: { kind: 'write', inFlightWindowMs: 0, confirmation: 'approval', summary: 'Approve {{message}}' } } }),
  ).toEqual([]);
});

it('takes a lookup only from a read the policy names: a write, or a tool it never names, is refused', () => {
  const charge = (lookup: string) => ({
    kind: 'write',
    inFlightWindowMs: 0,
    reconcile: { tool: lookup, arguments: { ref: '{{ref}}' }, found: { textIncludes: 'booked' } },
  });
  expect(mistakes({ tools: { charge: charge('charge') } })).toEqual([
    'tool charge: field reconcile.tool: charge is a write in this policy; the lookup must be a read (the reconciler calls it unkeyed, as often as it checks)',
  ]);
  expect(mistakes({ tools: { charge: charge('find_charge') } })).toEqual([
    'tool charge: field reconcile.tool: the policy does not name find_charge; the lookup must be a read the policy names ("find_charge": { "kind": "read" })',
  ]);
  // Object.prototype's names are not names the policy gives.
  expect(mistakes({ tools: { charge: charge('constructor') } })).toEqual([
    'tool charge: field reconcile.tool: the policy does not name constructor; the lookup must be a read the policy names ("constructor": { "kind": "read" })',
  ]);
  expect(mistakes({ tools: { charge: charge('find_charge'), find_charge: { kind: 'read' } } })).toEqual([]);
});

it('refuses fingerprint.exclude on a tool the person approves: what is approved is what is sent', () => {
  expect(
    mistakes({ tools: { send: { kind: 'write', inFlightWindowMs: 0, confirmation: 'approval', fingerprint: { exclude: ['target'] } } } }),
  ).toEqual([
    'tool send: field fingerprint.exclude cannot be used with confirmation "approval": the person approves the arguments, and an excluded one (target) could differ in what is sent; remove it from exclude',
  ]);
  expect(mistakes({ tools: { send: { kind: 'write', inFlightWindowMs: 0, fingerprint: { exclude: ['target'] } } } })).toEqual([]);
});

it("names every mistake at once: the file's own in every tool, and those against the upstream", () => {
  const input = {
    tools: {
      broken: { kind: 'write' },
      charge: {
        kind: 'write',
        inFlightWindowMs: 0,
        reconcile: { tool: 'charge', arguments: { nope: '{{ref}}' }, found: { textIncludes: 'x' } },
      },
      missing: { kind: 'read' },
    },
  };
  const { policy, mistakes: own } = checkGatewayPolicy(input);
  const upstream = [
    { name: 'charge', inputSchema: { properties: { ref: { type: 'string' } }, required: ['ref'] } },
    { name: 'broken', inputSchema: {} },
  ];
  expect([...own, ...checkPolicyAgainstUpstream(policy, upstream)]).toEqual([
    'tool broken: field inFlightWindowMs is required (how long the upstream may still apply a call after the gateway gave up on it, in ms)',
    'tool charge: field reconcile.tool: charge is a write in this policy; the lookup must be a read (the reconciler calls it unkeyed, as often as it checks)',
    'tool charge: field reconcile.arguments: charge has no argument nope (it has ref)',
    'tool charge: field reconcile.arguments: charge requires ref, which is not given',
    'tool missing: the upstream lists no tool of that name (it lists broken, charge)',
  ]);
});

it('names every mistake of one tool, though its entry fails the schema: the fields that parse are checked too', () => {
  const charge = {
    kind: 'write',
    confirmation: 'approval',
    summary: 'Charge {{amount}} ({{$key}})',
    fingerprint: { exclude: ['note'] },
    reconcile: { tool: 'charge', arguments: { ref: '{{ref}}' }, found: { textIncludes: 'booked' } },
  };
  expect(mistakes({ tools: { charge } })).toEqual([
    'tool charge: field inFlightWindowMs is required (how long the upstream may still apply a call after the gateway gave up on it, in ms)',
    'tool charge: field summary: {{$key}} cannot be shown in a summary (the person approves the arguments: name them, {{name}})',
    'tool charge: field reconcile.tool: charge is a write in this policy; the lookup must be a read (the reconciler calls it unkeyed, as often as it checks)',
    'tool charge: field fingerprint.exclude cannot be used with confirmation "approval": the person approves the arguments, and an excluded one (note) could differ in what is sent; remove it from exclude',
  ]);
  // A mistake inside the lookup does not hide the lookup's other fields either.
  expect(
    mistakes({
      tools: {
        charge: {
          ...charge,
          inFlightWindowMs: 0,
          summary: 'Charge {{amount}}',
          fingerprint: undefined,
          reconcile: { ...charge.reconcile, absent: 'gone' },
        },
      },
    }),
  ).toEqual([
    'tool charge: field reconcile.absent: Invalid input: expected object, received string',
    'tool charge: field reconcile.tool: charge is a write in this policy; the lookup must be a read (the reconciler calls it unkeyed, as often as it checks)',
  ]);
});

it("knows only the names the file and the upstream give: Object.prototype's names and __proto__ are no tool and no argument", () => {
  const policy = parseGatewayPolicy(
    JSON.parse('{ "tools": { "__proto__": { "kind": "read" }, "constructor": { "kind": "write", "inFlightWindowMs": 0 } } }'),
  );
  expect([...policy.tools.keys()]).toEqual(['__proto__', 'constructor']);
  expect(policy.tools.get('toString')).toBeUndefined();
  const write = parseGatewayPolicy({
    tools: {
      send: {
        kind: 'write',
        inFlightWindowMs: 0,
        key: { argument: 'toString' },
        fingerprint: { exclude: ['valueOf'] },
        summary: 'Send {{constructor}}',
      },
    },
  });
  expect(checkPolicyAgainstUpstream(write, [{ name: 'send', inputSchema: { properties: { to: { type: 'string' } } } }])).toEqual([
    'tool send: field key.argument: the upstream tool has no argument toString (it has to)',
    'tool send: field fingerprint.exclude: the upstream tool has no argument valueOf',
    'tool send: field summary: {{constructor}} names no argument of send (it has to)',
  ]);
  // A call without the argument a template names cannot be checked: the prototype's value is not the call's.
  expect(
    prepareLookup({ tool: 'find', arguments: { ref: '{{constructor}}' }, found: { textIncludes: 'x' } }, { args: {}, key: 'k' }),
  ).toBeUndefined();
});

it("quotes the agent's text in a summary as the reference tools do: it cannot close its quote and add to the summary", () => {
  expect(fillSummary('Send {{amount}} to {{target}}', { amount: 5, target: 'alice" and 100 to "mallory' })).toBe(
    'Send 5 to "alice\\" and 100 to \\"mallory"',
  );
  expect(fillSummary('Send to {{target}}', {})).toBeUndefined();
});
