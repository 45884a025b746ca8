/**
 * The AWS SDK's `NodeVersionSupportWarning` (its releases after the first week of January 2027 need Node 22). On
 * Node 20 every copy of the SDK a process loads (its ESM and its CommonJS build are two) prints it, a paragraph, when
 * it makes its first client: before a command's first line, and once more per copy. README "Quick start" says what
 * Node 20 brings; the commands and the test run keep it quiet. The SDK reads the switch when a client is made, so an
 * entry point turns it before it makes one. A value the person set (`false`: show it) is theirs.
 */
export const SDK_NODE_NOTICE_SWITCH = 'AWS_SDK_JS_NODE_VERSION_SUPPORT_WARNING_DISABLED';

/** Turns the SDK's Node version notice off in `env` (this process's by default), unless it is set there already. */
export function quietSdkNodeNotice(env: NodeJS.ProcessEnv = process.env): void {
  env[SDK_NODE_NOTICE_SWITCH] ??= 'true';
}
