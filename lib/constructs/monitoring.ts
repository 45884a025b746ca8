import { Duration } from 'aws-cdk-lib';
import * as cloudwatch from 'aws-cdk-lib/aws-cloudwatch';
import * as actions from 'aws-cdk-lib/aws-cloudwatch-actions';
import type * as lambda from 'aws-cdk-lib/aws-lambda';
import type * as sns from 'aws-cdk-lib/aws-sns';
import type * as sqs from 'aws-cdk-lib/aws-sqs';
import { Construct } from 'constructs';
import { resolvePowertools, type PowertoolsSettings } from './service-function';

/**
 * Metric names the reconciler emits (lambdas/observability/metrics.ts), with the `service` dimension only.
 */
const ReconcilerMetric = {
  NeedsReview: 'NeedsReview',
  OldestUnknownAgeSeconds: 'OldestUnknownAgeSeconds',
} as const;

/**
 * Props of `Monitoring`: the functions and dead-letter queue it watches, the unknown-age threshold, where alarms go, the dashboard.
 */
export interface MonitoringProps {
  /** The functions whose errors and throttles raise an alarm, by a short name used in alarm ids and titles. */
  readonly functions: Record<string, lambda.IFunction>;
  /**
   * The outbox's dead-letter queue: a message there raises an alarm.
   * @default none: the endpoint has no outbox
   */
  readonly deadLetterQueue?: sqs.IQueue;
  /** @default the Powertools defaults of PowertoolsSettings */
  readonly powertools?: PowertoolsSettings;
  /**
   * Alarm when the oldest UNKNOWN record is older than this.
   * @default Duration.minutes(15)
   */
  readonly oldestUnknownAgeThreshold?: Duration;
  /**
   * Where alarms (and their recoveries) are sent.
   * @default nowhere (they still show in the console)
   */
  readonly alarmTopic?: sns.ITopic;
  /**
   * One small dashboard ($3/month beyond the account's first three).
   * @default true
   */
  readonly dashboard?: boolean;
}

const FIVE_MINUTES = Duration.minutes(5);

/**
 * What an operator must hear about: a side effect that ended in the dead-letter queue, records parked for a person
 * (NEEDS_REVIEW), an UNKNOWN outcome that stays unsettled (or a reconciler that stopped reporting), and function
 * errors and throttles. About $0.10 per alarm per month.
 */
export class Monitoring extends Construct {
  readonly alarms: cloudwatch.Alarm[] = [];
  readonly dashboard?: cloudwatch.Dashboard;

  constructor(scope: Construct, id: string, props: MonitoringProps) {
    super(scope, id);
    const { serviceName, metricsNamespace } = resolvePowertools(props.powertools);
    const reconcilerMetric = (metricName: string) =>
      new cloudwatch.Metric({
        namespace: metricsNamespace,
        metricName,
        dimensionsMap: { service: serviceName },
        statistic: cloudwatch.Stats.MAXIMUM,
        period: FIVE_MINUTES,
      });

    const dlqDepth = props.deadLetterQueue?.metricApproximateNumberOfMessagesVisible({
      statistic: cloudwatch.Stats.MAXIMUM,
      period: Duration.minutes(1),
    });
    if (dlqDepth) {
      this.add('DeadLetterQueueDepth', dlqDepth, {
        threshold: 1,
        description:
          'An outbox side effect failed on every delivery and is in the dead-letter queue: look at it, then redrive or settle it.',
        treatMissingData: cloudwatch.TreatMissingData.NOT_BREACHING,
      });
    }

    // Gauges the reconciler emits on every run (every minute).
    const needsReview = reconcilerMetric(ReconcilerMetric.NeedsReview);
    this.add('NeedsReview', needsReview, {
      threshold: 1,
      description: 'Operations whose outcome could not be verified are parked as NEEDS_REVIEW: a person must settle them.',
      treatMissingData: cloudwatch.TreatMissingData.NOT_BREACHING,
    });
    const oldestUnknown = reconcilerMetric(ReconcilerMetric.OldestUnknownAgeSeconds);
    const maxAge = props.oldestUnknownAgeThreshold ?? Duration.minutes(15);
    this.add('OldestUnknownAge', oldestUnknown, {
      threshold: maxAge.toSeconds() + 1,
      evaluationPeriods: 2,
      description: `An UNKNOWN outcome has stayed unsettled for over ${maxAge.toMinutes()} minutes, or the reconciler stopped reporting (missing data counts as breaching).`,
      // The gauge arrives every minute; its absence means the reconciler is not running.
      treatMissingData: cloudwatch.TreatMissingData.BREACHING,
    });

    for (const [name, fn] of Object.entries(props.functions)) {
      this.add(`${name}Errors`, fn.metricErrors({ statistic: cloudwatch.Stats.SUM, period: FIVE_MINUTES }), {
        threshold: 1,
        description: `The ${name} function failed (an unhandled error or a timeout; tool failures are answers, not errors).`,
        treatMissingData: cloudwatch.TreatMissingData.NOT_BREACHING,
      });
      this.add(`${name}Throttles`, fn.metricThrottles({ statistic: cloudwatch.Stats.SUM, period: FIVE_MINUTES }), {
        threshold: 1,
        description: `The ${name} function was throttled (account or function concurrency limit).`,
        treatMissingData: cloudwatch.TreatMissingData.NOT_BREACHING,
      });
    }

    if (props.alarmTopic) {
      const action = new actions.SnsAction(props.alarmTopic);
      for (const alarm of this.alarms) {
        alarm.addAlarmAction(action);
        alarm.addOkAction(action);
      }
    }

    if (props.dashboard ?? true) {
      const perTool = (metricName: string, label: string) =>
        new cloudwatch.MathExpression({
          expression: `SEARCH('{${metricsNamespace},service,tool} MetricName="${metricName}" service="${serviceName}"', 'Sum', 300)`,
          label,
          period: FIVE_MINUTES,
        });
      const fns = Object.entries(props.functions);
      this.dashboard = new cloudwatch.Dashboard(this, 'Dashboard', {
        defaultInterval: Duration.hours(6),
        widgets: [
          [new cloudwatch.AlarmStatusWidget({ title: 'Alarms', alarms: this.alarms, width: 24, height: 4 })],
          [
            ...(dlqDepth ? [new cloudwatch.GraphWidget({ title: 'Dead-letter queue depth', left: [dlqDepth], width: 8 })] : []),
            new cloudwatch.GraphWidget({ title: 'NEEDS_REVIEW records', left: [needsReview], width: dlqDepth ? 8 : 12 }),
            new cloudwatch.GraphWidget({
              title: 'Oldest UNKNOWN (s)',
              left: [oldestUnknown],
              leftAnnotations: [{ value: maxAge.toSeconds(), label: 'alarm' }],
              width: dlqDepth ? 8 : 12,
            }),
          ],
          [
            new cloudwatch.GraphWidget({
              title: 'Executions and replays per tool',
              left: [perTool('Executions', 'executed'), perTool('Replays', 'replayed')],
              width: 12,
            }),
            new cloudwatch.GraphWidget({
              title: 'Conflicts, in progress, unknown',
              left: [perTool('Conflicts', 'conflict'), perTool('InProgressTimeouts', 'in progress'), perTool('UnknownOutcomes', 'unknown')],
              width: 12,
            }),
          ],
          [
            new cloudwatch.GraphWidget({
              title: 'Function errors',
              left: fns.map(([name, fn]) => fn.metricErrors({ statistic: cloudwatch.Stats.SUM, period: FIVE_MINUTES, label: name })),
              width: 8,
            }),
            new cloudwatch.GraphWidget({
              title: 'Function throttles',
              left: fns.map(([name, fn]) => fn.metricThrottles({ statistic: cloudwatch.Stats.SUM, period: FIVE_MINUTES, label: name })),
              width: 8,
            }),
            new cloudwatch.GraphWidget({
              title: 'Duration p99 (ms)',
              left: fns.map(([name, fn]) => fn.metricDuration({ statistic: 'p99', period: FIVE_MINUTES, label: name })),
              width: 8,
            }),
          ],
        ],
      });
    }
  }

  private add(
    id: string,
    metric: cloudwatch.IMetric,
    options: {
      threshold: number;
      description: string;
      treatMissingData: cloudwatch.TreatMissingData;
      evaluationPeriods?: number;
    },
  ): cloudwatch.Alarm {
    const alarm = new cloudwatch.Alarm(this, id, {
      metric,
      threshold: options.threshold,
      comparisonOperator: cloudwatch.ComparisonOperator.GREATER_THAN_OR_EQUAL_TO_THRESHOLD,
      evaluationPeriods: options.evaluationPeriods ?? 1,
      alarmDescription: options.description,
      treatMissingData: options.treatMissingData,
    });
    this.alarms.push(alarm);
    return alarm;
  }
}
