import { Duration, RemovalPolicy, Validations } from 'aws-cdk-lib';
import * as iam from 'aws-cdk-lib/aws-iam';
import * as lambda from 'aws-cdk-lib/aws-lambda';
import { LogLevel, NodejsFunction, OutputFormat } from 'aws-cdk-lib/aws-lambda-nodejs';
import * as logs from 'aws-cdk-lib/aws-logs';
import { Construct } from 'constructs';
import { EnvVars, environmentOf } from '../../lambdas/config';
import { LambdaBundle, lambdaEsbuildArgs } from '../bundling';
import { PACKAGE_ROOT, projectOf } from '../package-root';

/** This package's folder (the repository when run from source). */
export const PROJECT_ROOT = PACKAGE_ROOT;

/** Powertools settings every function shares, so all metrics carry the same `service` dimension the alarms read. */
export interface PowertoolsSettings {
  /** POWERTOOLS_SERVICE_NAME. Default `idempotent-mcp`. */
  serviceName?: string;
  /** POWERTOOLS_METRICS_NAMESPACE. Default `IdempotentMcp`. */
  metricsNamespace?: string;
  /** POWERTOOLS_LOG_LEVEL. Default `INFO`. */
  logLevel?: 'DEBUG' | 'INFO' | 'WARN' | 'ERROR';
}

export const resolvePowertools = (p: PowertoolsSettings = {}): Required<PowertoolsSettings> => ({
  serviceName: p.serviceName ?? EnvVars.powertoolsServiceName.parse(undefined),
  metricsNamespace: p.metricsNamespace ?? EnvVars.powertoolsMetricsNamespace.parse(undefined),
  logLevel: p.logLevel ?? 'INFO',
});

/** DOWNSTREAM_TIMEOUT_MS of a function: the prop's, else the functions' own default, written out so the template shows it. */
export const downstreamTimeoutMs = (timeout: Duration | undefined): number => timeout?.toMilliseconds() ?? EnvVars.downstreamTimeoutMs.parse(undefined);

/** What every function of the stack shares; each concern's construct adds its own settings. */
export interface CommonFunctionProps {
  powertools?: PowertoolsSettings;
  /** Default one month. */
  logRetention?: logs.RetentionDays;
  /** Default ARM_64 (cheaper per ms, and the bundle has no native code). */
  architecture?: lambda.Architecture;
}

/** Just the shared settings out of a construct's props. */
export const commonFunctionProps = ({ powertools, logRetention, architecture }: CommonFunctionProps): CommonFunctionProps => ({
  powertools,
  logRetention,
  architecture,
});

export interface ServiceFunctionProps extends CommonFunctionProps {
  /** The file esbuild bundles, exporting `handler` (absolute path; see handlerEntry and tools-entry.ts). */
  entry: string;
  description: string;
  timeout: Duration;
  /** More memory is more CPU, which shortens the cold start. Default 512 MB. */
  memorySize?: number;
  environment?: Record<string, string>;
  /** The AWS Parameters and Secrets Lambda Extension, for functions that read a secret. */
  paramsAndSecrets?: lambda.ParamsAndSecretsLayerVersion;
}

/**
 * One Lambda function: Node.js 22, bundled by the local esbuild (never Docker) with the shared bundle settings,
 * its own log group and a role that may write only to that log group until the owning construct grants more.
 */
export class ServiceFunction extends Construct {
  readonly function: NodejsFunction;
  readonly role: iam.Role;
  readonly logGroup: logs.LogGroup;

  constructor(scope: Construct, id: string, props: ServiceFunctionProps) {
    super(scope, id);
    const powertools = resolvePowertools(props.powertools);
    this.logGroup = new logs.LogGroup(this, 'Logs', {
      retention: props.logRetention ?? logs.RetentionDays.ONE_MONTH,
      removalPolicy: RemovalPolicy.DESTROY,
    });
    // An own role instead of AWSLambdaBasicExecutionRole: that managed policy may write to every log group.
    this.role = new iam.Role(this, 'Role', {
      assumedBy: new iam.ServicePrincipal('lambda.amazonaws.com'),
      description: `${props.description} (least privilege: grants are added per concern)`,
    });
    this.logGroup.grantWrite(this.role);

    this.function = new NodejsFunction(this, 'Function', {
      entry: props.entry,
      handler: 'handler',
      // esbuild runs in the project the entry belongs to: this repository, or the app that installed the package.
      ...projectOf(props.entry),
      description: props.description,
      runtime: lambda.Runtime.NODEJS_22_X,
      architecture: props.architecture ?? lambda.Architecture.ARM_64,
      memorySize: props.memorySize ?? 512,
      timeout: props.timeout,
      role: this.role,
      logGroup: this.logGroup,
      paramsAndSecrets: props.paramsAndSecrets,
      environment: {
        ...environmentOf({
          powertoolsServiceName: powertools.serviceName,
          powertoolsMetricsNamespace: powertools.metricsNamespace,
          powertoolsLogLevel: powertools.logLevel,
        }),
        ...props.environment,
      },
      bundling: {
        forceDockerBundling: false,
        format: OutputFormat.ESM,
        target: LambdaBundle.target,
        minify: LambdaBundle.minify,
        sourceMap: LambdaBundle.sourcemap,
        mainFields: [...LambdaBundle.mainFields],
        banner: LambdaBundle.banner,
        externalModules: [...LambdaBundle.external],
        esbuildArgs: lambdaEsbuildArgs(),
        // esbuild's size table and timing per function would fill `npm run synth --quiet`; warnings still show.
        logLevel: LogLevel.WARNING,
      },
    });
    Validations.of(this.function).acknowledge({
      id: 'AwsSolutions-L1',
      reason:
        'Node.js 22 (LTS, supported by Lambda until 2027) is the runtime this project builds for and tests against; the bundle target in lib/bundling.ts moves with it.',
    });

  }
}
