/**
 * The fixture tools as a tools module (it exports `tools`, as a team's tools file does), for a process that loads
 * one by path: the review CLI's `--tools` (test/integration/ops-review.test.ts). Their downstream is
 * FIXTURE_DOWNSTREAM_URL (a fixture stack's `downstream.url`), each call bounded by DOWNSTREAM_TIMEOUT_MS.
 */
import { EnvVars } from '../../lambdas/config';
import { read } from '../../lambdas/env-var';
import { fixtureTools } from './fixture-tools';

const url = process.env.FIXTURE_DOWNSTREAM_URL;
if (!url) throw new Error("FIXTURE_DOWNSTREAM_URL is not set: give the fixture downstream's URL (a fixture stack's downstream.url)");

export const tools = fixtureTools({ url }, read(process.env, EnvVars.downstreamTimeoutMs)).tools;
