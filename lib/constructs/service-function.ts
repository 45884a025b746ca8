import { existsSync } from 'node:fs';
import { parse } from 'node:path';
import { AssetHashType, DockerImage, Duration, RemovalPolicy, Stack, Validations } from 'aws-cdk-lib';
import type * as ec2 from 'aws-cdk-lib/aws-ec2';
import * as iam from 'aws-cdk-lib/aws-iam';
import * as lambda from 'aws-cdk-lib/aws-lambda';
import { NodejsFunction } from 'aws-cdk-lib/aws-lambda-nodejs';
import * as logs from 'aws-cdk-lib/aws-logs';
import { Construct } from 'constructs';
import { EnvVars, environmentOf } from '../../lambdas/config';
import { LAMBDA_BUNDLE_FILE, lambdaBuild } from '../bundling';
import { PACKAGE_ROOT, projectOf } from '../package-root';

/** This package's folder (the repository when run from source). */
export const PROJECT_ROOT = PACKAGE_ROOT;

/**
 * Powertools settings every function shares, so all metrics carry the same `service` dimension the alarms read.
 *
 * @public
 */
export interface PowertoolsSettings {
  /**
   * POWERTOOLS_SERVICE_NAME.
   * @default 'idempotent-mcp'
   */
  readonly serviceName?: string;
  /**
   * POWERTOOLS_METRICS_NAMESPACE.
   * @default 'IdempotentMcp'
   */
  readonly metricsNamespace?: string;
  /**
   * POWERTOOLS_LOG_LEVEL.
   * @default 'INFO'
   */
  readonly logLevel?: 'DEBUG' | 'INFO' | 'WARN' | 'ERROR';
}

export const resolvePowertools = (p: PowertoolsSettings = {}): Required<PowertoolsSettings> => ({
  serviceName: p.serviceName ?? EnvVars.powertoolsServiceName.parse(undefined),
  metricsNamespace: p.metricsNamespace ?? EnvVars.powertoolsMetricsNamespace.parse(undefined),
  logLevel: p.logLevel ?? 'INFO',
});

/** DOWNSTREAM_TIMEOUT_MS of a function: the prop's, else the functions' own default, written out so the template shows it. */
export const downstreamTimeoutMs = (timeout: Duration | undefined): number =>
  timeout?.toMilliseconds() ?? EnvVars.downstreamTimeoutMs.parse(undefined);

/**
 * What a team may tune on each function of an endpoint (IdempotentMcpEndpoint's `functions`).
 *
 * @public
 */
export interface FunctionOptions {
  /**
   * Memory in MB (128 to 10240); more memory is more CPU, which shortens the cold start.
   * @default each function's own: 1024 for the MCP function, 512 for the others
   */
  readonly memorySize?: number;
  /**
   * @default each function's own: MCP 29 s, reconciler 50 s, consumer 60 s (the queue's visibility timeout is six
   * times it), relay 30 s
   */
  readonly timeout?: Duration;
  /**
   * Concurrency reserved for the function (and its ceiling).
   * @default none: the function shares the account's unreserved concurrency
   */
  readonly reservedConcurrentExecutions?: number;
  /**
   * @default lambda.Architecture.ARM_64 (cheaper per ms; the bundle has no native code)
   */
  readonly architecture?: lambda.Architecture;
}

/**
 * What every function of an endpoint shares (ServiceFunctionProps but what is each function's own); each concern's
 * construct adds its own settings.
 */
export interface CommonFunctionProps extends Omit<ServiceFunctionProps, 'entry' | 'description' | 'timeout' | 'environment'> {
  readonly timeout?: Duration;
}

/** Just the shared settings out of a construct's props. */
export const commonFunctionProps = ({
  powertools,
  logRetention,
  architecture,
  memorySize,
  reservedConcurrentExecutions,
  vpc,
  vpcSubnets,
  securityGroups,
}: CommonFunctionProps): CommonFunctionProps => ({
  powertools,
  logRetention,
  architecture,
  memorySize,
  reservedConcurrentExecutions,
  vpc,
  vpcSubnets,
  securityGroups,
});

/** The largest timeout and memory Lambda allows. */
const MAX_TIMEOUT = Duration.minutes(15);
const MEMORY_MB = { min: 128, max: 10_240 };

/** A function's options checked, or an error naming the prop (thrown at synth, not at deploy). */
export function checkFunctionOptions(prop: string, options: FunctionOptions = {}): void {
  const { memorySize, timeout, reservedConcurrentExecutions } = options;
  if (memorySize !== undefined && (!Number.isInteger(memorySize) || memorySize < MEMORY_MB.min || memorySize > MEMORY_MB.max)) {
    throw new Error(`${prop}.memorySize must be a whole number of MB from ${MEMORY_MB.min} to ${MEMORY_MB.max} (got ${memorySize})`);
  }
  if (timeout !== undefined && (timeout.toMilliseconds() < 1000 || timeout.toMilliseconds() > MAX_TIMEOUT.toMilliseconds())) {
    throw new Error(`${prop}.timeout must be from 1 second to 15 minutes (got ${timeout.toHumanString()})`);
  }
  if (reservedConcurrentExecutions !== undefined && (!Number.isInteger(reservedConcurrentExecutions) || reservedConcurrentExecutions < 1)) {
    throw new Error(
      `${prop}.reservedConcurrentExecutions must be a whole number of at least 1 (got ${reservedConcurrentExecutions}); to stop a function, remove the endpoint instead`,
    );
  }
}

/**
 * Props of `ServiceFunction`: its entry file, description, timeout and environment, beside the settings every
 * function of an endpoint has (memory, architecture, Powertools, log retention, VPC).
 * @public
 */
export interface ServiceFunctionProps extends FunctionOptions {
  /** The file esbuild bundles (absolute path): it exports the Lambda handler, as `export const handler`. */
  readonly entry: string;
  /** The function's description, also its role's. */
  readonly description: string;
  /** The function's timeout. */
  readonly timeout: Duration;
  /** @default none */
  readonly environment?: Record<string, string>;
  /** @default the Powertools defaults of PowertoolsSettings */
  readonly powertools?: PowertoolsSettings;
  /** @default logs.RetentionDays.ONE_MONTH */
  readonly logRetention?: logs.RetentionDays;
  /**
   * Run the function in this VPC. Its subnets need a way to whatever it calls (gateway / interface endpoints or a NAT).
   * @default none: the function runs outside any VPC
   */
  readonly vpc?: ec2.IVpc;
  /**
   * Which subnets of `vpc`.
   * @default the VPC's private subnets (CDK's default selection)
   */
  readonly vpcSubnets?: ec2.SubnetSelection;
  /**
   * @default one new security group, all outbound traffic allowed
   */
  readonly securityGroups?: ec2.ISecurityGroup[];
}

/**
 * One Lambda function: Node.js 22, bundled in the synth's process by the project's esbuild (never Docker) with the
 * shared bundle settings, its own log group and a role that may write only to that log group until the owning
 * construct grants more.
 * @public
 */
export class ServiceFunction extends Construct implements iam.IGrantable {
  /** The Lambda function (Node.js 22, the bundle of `entry`). */
  readonly function: NodejsFunction;
  /** The function's own role: it may write only to `logGroup` until you grant more. */
  readonly role: iam.Role;
  /** The function's own log group, kept `logRetention`. */
  readonly logGroup: logs.LogGroup;
  /** The function's role: grant it what your code calls. */
  readonly grantPrincipal: iam.IPrincipal;

  constructor(scope: Construct, id: string, props: ServiceFunctionProps) {
    super(scope, id);
    checkFunctionOptions(this.node.path, props);
    if (!props.vpc && (props.vpcSubnets || props.securityGroups?.length))
      throw new Error(`${this.node.path}: vpcSubnets and securityGroups need a vpc`);
    if (!existsSync(props.entry)) throw new Error(`${this.node.path}: the entry ${props.entry} does not exist`);
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
    this.grantPrincipal = this.role;
    if (props.vpc) {
      // Lambda creates and removes the function's network interfaces with these (what a function's own role gets
      // from CDK when CDK makes the role).
      this.role.addManagedPolicy(iam.ManagedPolicy.fromAwsManagedPolicyName('service-role/AWSLambdaVPCAccessExecutionRole'));
      Validations.of(this.role).acknowledge({
        id: 'AwsSolutions-IAM4[Policy::arn:<AWS::Partition>:iam::aws:policy/service-role/AWSLambdaVPCAccessExecutionRole]',
        reason:
          "AWS's own policy for a function in a VPC: only the EC2 network-interface actions Lambda needs to attach the function to its subnets, kept current by AWS.",
      });
    }

    // esbuild runs in the project the entry belongs to: this repository, or the app that installed the package.
    const project = projectOf(props.entry);
    const runtime = lambda.Runtime.NODEJS_22_X;
    // Bundled once, here, only when this synth bundles (`cdk synth --exclusively` and the tests that read templates
    // skip bundling): the hash is known before CDK stages the asset, so a synth into a cloud assembly that already
    // holds this bundle writes nothing again; otherwise CDK calls tryBundle, which writes the bundle built here.
    const build = Stack.of(this).bundlingRequired ? lambdaBuild(props.entry, project, { runtime: runtime.name }) : undefined;
    const code = lambda.Code.fromAsset(project.projectRoot, {
      assetHash: build?.hash,
      // As NodejsFunction: without a source hash, CDK hashes the bundle it staged.
      assetHashType: build?.hash ? AssetHashType.CUSTOM : AssetHashType.OUTPUT,
      bundling: {
        // Never pulled or run: local bundling never declines (it throws why it cannot bundle), so Docker is never
        // reached. CDK's NodejsFunction names the same placeholder image when esbuild is local.
        image: DockerImage.fromRegistry('dummy'),
        local: {
          tryBundle: (outputDir) => {
            (build ?? lambdaBuild(props.entry, project, { runtime: runtime.name })).write(outputDir);
            return true;
          },
        },
      },
    });
    // A NodejsFunction given its code: CDK's own bundling would run esbuild through `npx` in a shell, one npm start per
    // function; the type, construct path and logical ids stay those of a NodejsFunction.
    this.function = new NodejsFunction(this, 'Function', {
      code,
      handler: `${parse(LAMBDA_BUNDLE_FILE).name}.handler`,
      description: props.description,
      runtime,
      architecture: props.architecture ?? lambda.Architecture.ARM_64,
      memorySize: props.memorySize ?? 512,
      timeout: props.timeout,
      reservedConcurrentExecutions: props.reservedConcurrentExecutions,
      vpc: props.vpc,
      vpcSubnets: props.vpcSubnets,
      securityGroups: props.securityGroups,
      role: this.role,
      logGroup: this.logGroup,
      environment: {
        ...environmentOf({
          powertoolsServiceName: powertools.serviceName,
          powertoolsMetricsNamespace: powertools.metricsNamespace,
          powertoolsLogLevel: powertools.logLevel,
        }),
        ...props.environment,
      },
    });
    Validations.of(this.function).acknowledge({
      id: 'AwsSolutions-L1',
      reason:
        'Node.js 22 (LTS, supported by Lambda until 2027) is the runtime this project builds for and tests against; the bundle target in lib/bundling.ts moves with it.',
    });
  }
}
