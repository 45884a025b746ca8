import { expect, it } from 'vitest';
import * as cdk from 'idempotent-mcp/cdk';
import * as client from 'idempotent-mcp/client';
import * as dynamodb from 'idempotent-mcp/dynamodb';
import * as engine from 'idempotent-mcp/engine';
import * as mcp from 'idempotent-mcp/mcp';

/**
 * A construct and a runtime class never share a name (the endpoint's reconciler is IdempotentMcpEndpoint's, the
 * reconciler of a server of your own is startReconciler): an app that imports both subpaths, or a reader of either, cannot mix them up.
 */
it('gives the constructs names of their own, none shared with the runtime subpaths', () => {
  const runtime = new Set([client, dynamodb, engine, mcp].flatMap((subpath) => Object.keys(subpath)));
  expect(Object.keys(cdk)).toEqual(expect.arrayContaining(['IdempotentMcpEndpoint', 'IdempotentMcpGateway']));
  expect(Object.keys(cdk).filter((name) => runtime.has(name))).toEqual([]);
});
