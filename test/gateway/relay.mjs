#!/usr/bin/env node
// A stdio relay between the gateway and a registry MCP server: the gateway starts this as its upstream command, and
// this starts the real server and passes every line through, both ways. It appends every `tools/call` it forwards
// to --log (one JSON line each, written before forwarding: the count survives a kill of this process) and applies
// the faults of --faults (read on every call, so a test changes them between calls; each rule is used up `times`):
//   { "tool": "edit_file", "match": "<substring of the arguments' JSON>", "action": "drop-answer" }  the server
//       applies the call, its answer never reaches the gateway
//   { ..., "action": "delay", "ms": 3000 }      the call reaches the server ms later (an effect landing late)
//   { ..., "action": "kill", "ms": 300 }        the call is forwarded, its answer held, then the server and this
//       relay are SIGKILLed
// Plain JavaScript, so it starts as fast as the server it wraps.
import { spawn } from 'node:child_process';
import { appendFileSync, existsSync, readFileSync, writeFileSync } from 'node:fs';
import { createInterface } from 'node:readline';

const argv = process.argv.slice(2);
const split = argv.indexOf('--');
// --log=<file> --faults=<file> -- <server command> [args]
const flags = Object.fromEntries(argv.slice(0, split).map((flag) => flag.replace(/^--/, '').split(/=(.*)/s, 2)));
const [command, ...args] = argv.slice(split + 1);
const server = spawn(command, args, { stdio: ['pipe', 'pipe', 'inherit'], env: process.env });
const dropped = new Set();

function takeFault(message) {
  if (!flags.faults || !existsSync(flags.faults)) return undefined;
  const rules = JSON.parse(readFileSync(flags.faults, 'utf8'));
  const text = JSON.stringify(message.params?.arguments ?? {});
  const index = rules.findIndex(
    (rule) => rule.tool === message.params?.name && (rule.match === undefined || text.includes(rule.match)) && (rule.times ?? 1) > 0,
  );
  if (index < 0) return undefined;
  const rule = rules[index];
  rules[index] = { ...rule, times: (rule.times ?? 1) - 1 };
  writeFileSync(flags.faults, JSON.stringify(rules));
  return rule;
}

function kill() {
  server.kill('SIGKILL');
  process.kill(process.pid, 'SIGKILL');
}

createInterface({ input: process.stdin }).on('line', (line) => {
  let message;
  try {
    message = JSON.parse(line);
  } catch {
    server.stdin.write(`${line}\n`);
    return;
  }
  if (message.method !== 'tools/call') {
    server.stdin.write(`${line}\n`);
    return;
  }
  const fault = takeFault(message);
  const forward = () => {
    if (flags.log)
      appendFileSync(flags.log, `${JSON.stringify({ name: message.params.name, arguments: message.params.arguments, at: Date.now() })}\n`);
    server.stdin.write(`${line}\n`);
  };
  // A kill mid-call: the server has the call (and applies it), its answer never leaves before the kill.
  if (fault?.action === 'drop-answer' || fault?.action === 'kill') dropped.add(message.id);
  if (fault?.action === 'delay') {
    setTimeout(forward, fault.ms);
    return;
  }
  forward();
  if (fault?.action === 'kill') setTimeout(kill, fault.ms ?? 0);
});

createInterface({ input: server.stdout }).on('line', (line) => {
  try {
    const message = JSON.parse(line);
    if (message.id !== undefined && dropped.has(message.id) && message.method === undefined) {
      dropped.delete(message.id);
      return;
    }
  } catch {
    // not JSON: passed on as is
  }
  process.stdout.write(`${line}\n`);
});

server.on('exit', () => process.exit(0));
process.stdin.on('end', () => server.kill('SIGTERM'));
