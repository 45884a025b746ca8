import { describe, expect, it } from 'vitest';
import { synthStack } from './support';

describe('probe', () => {
  it('synths', () => {
    const { template } = synthStack();
    const r = template.toJSON().Resources;
    for (const [id, res] of Object.entries<any>(r)) if (/Cognito|ApiGatewayV2/.test(res.Type)) console.log(id, res.Type, JSON.stringify(res.Properties).slice(0, 600));
    const fn = Object.entries<any>(r).find(([id, res]) => res.Type === 'AWS::Lambda::Function' && id.startsWith('Mcp'));
    console.log(JSON.stringify(fn![1].Properties.Environment.Variables, null, 1));
  });
});
