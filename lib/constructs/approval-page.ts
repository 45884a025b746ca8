import { RemovalPolicy, Validations } from 'aws-cdk-lib';
import * as apigateway from 'aws-cdk-lib/aws-apigateway';
import * as apigwv2 from 'aws-cdk-lib/aws-apigatewayv2';
import { HttpLambdaIntegration } from 'aws-cdk-lib/aws-apigatewayv2-integrations';
import type * as lambda from 'aws-cdk-lib/aws-lambda';
import * as logs from 'aws-cdk-lib/aws-logs';
import { Construct } from 'constructs';
import { APPROVAL_CALLBACK_PATH, APPROVALS_PATH } from '../../lambdas/core/endpoint-paths';

/**
 * Props of `ApprovalPageApi`: its log retention and throttling.
 */
export interface ApprovalPageApiProps {
  /**
   * How long the page's access log is kept.
   * @default logs.RetentionDays.ONE_MONTH
   */
  readonly logRetention?: logs.RetentionDays;
  /**
   * Requests per second the page answers (people click; a flood is refused by API Gateway before the function runs).
   * @default 20 per second, bursts of 40
   */
  readonly throttle?: apigwv2.ThrottleSettings;
}

/**
 * The approval page's own front door: an HTTP API whose `/approvals/...` routes reach the MCP function (which serves
 * the page). Its URL does not depend on the function, so the sign-in client can name the page's callback while the
 * function names the client: the Function URL could not (its address exists only with the function, whose
 * environment needs the client). Not needed when `publicBaseUrl` (a custom domain) fronts the function.
 */
export class ApprovalPageApi extends Construct {
  readonly api: apigwv2.HttpApi;
  readonly accessLog: logs.LogGroup;

  constructor(scope: Construct, id: string, props: ApprovalPageApiProps = {}) {
    super(scope, id);
    this.api = new apigwv2.HttpApi(this, 'Api', {
      description: 'The approval page (people approve operations here, signed in)',
      createDefaultStage: false,
    });
    this.accessLog = new logs.LogGroup(this, 'AccessLog', {
      retention: props.logRetention ?? logs.RetentionDays.ONE_MONTH,
      removalPolicy: RemovalPolicy.DESTROY,
    });
    // No query string is logged: the sign-in callback carries the authorization code in it.
    const format = apigateway.AccessLogFormat.custom(
      JSON.stringify({
        requestId: '$context.requestId',
        ip: '$context.identity.sourceIp',
        time: '$context.requestTime',
        method: '$context.httpMethod',
        route: '$context.routeKey',
        status: '$context.status',
        integrationError: '$context.integrationErrorMessage',
      }),
    );
    this.api.addStage('DefaultStage', {
      stageName: '$default',
      autoDeploy: true,
      throttle: props.throttle ?? { rateLimit: 20, burstLimit: 40 },
      accessLogSettings: { destination: new apigwv2.LogGroupLogDestination(this.accessLog), format },
    });
  }

  /** The page's base URL (no trailing slash): links are `<baseUrl>/approvals/<id>`. */
  get baseUrl(): string {
    return this.api.apiEndpoint;
  }

  /** The redirect URI the page's sign-in client registers. */
  get callbackUrl(): string {
    return `${this.baseUrl}${APPROVAL_CALLBACK_PATH}`;
  }

  /**
   * Routes the page's requests to `fn`, the function that serves it: GET and POST of each approval under
   * `/approvals/`, and GET of `/approvals` itself (the page's own URL, which `{proxy+}` does not match).
   */
  serve(fn: lambda.IFunction): void {
    const integration = new HttpLambdaIntegration('Page', fn, { payloadFormatVersion: apigwv2.PayloadFormatVersion.VERSION_2_0 });
    const routes = [
      ...this.api.addRoutes({
        path: `${APPROVALS_PATH}/{proxy+}`,
        methods: [apigwv2.HttpMethod.GET, apigwv2.HttpMethod.POST],
        integration,
      }),
      ...this.api.addRoutes({ path: APPROVALS_PATH, methods: [apigwv2.HttpMethod.GET], integration }),
    ];
    for (const route of routes) {
      Validations.of(route).acknowledge({
        id: 'AwsSolutions-APIG4',
        reason:
          'The approval page signs people in itself (OpenID Connect authorization code with PKCE at the issuer) and shows or decides an approval only for a signed-in person of its tenant; an API Gateway authorizer cannot send an unsigned visitor to sign in.',
      });
    }
  }
}
