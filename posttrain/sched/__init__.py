"""The task scheduler: work items, fair-share priority queues, retries, exactly-once commit, scaling.

A pure core with no Ray and no torch: the local backend runs it over thread pools, `posttrain.dist`
over Ray actor pools. Semantics for users: docs/scheduler.md.
"""

from posttrain.sched.items import DeadlineExceeded, InfraFailure, Outcome, OutcomeStatus, WorkItem, WorkKind
from posttrain.sched.ledger import ResultLedger
from posttrain.sched.queues import FairQueue
from posttrain.sched.retry import RetryPolicy
from posttrain.sched.scaling import PoolStats, ScalingConfig, ScalingPolicy
from posttrain.sched.scheduler import Attempt, SchedConfig, Scheduler, drive, run_jobs
from posttrain.sched.stats import SchedStats
from posttrain.sched.workers import ThreadWorkerSet, WorkerSet, WorkFuture

__all__ = [
    "Attempt", "DeadlineExceeded", "FairQueue", "InfraFailure", "Outcome", "OutcomeStatus", "PoolStats",
    "ResultLedger", "RetryPolicy", "ScalingConfig", "ScalingPolicy", "SchedConfig", "SchedStats",
    "Scheduler", "ThreadWorkerSet", "WorkFuture", "WorkItem", "WorkKind", "WorkerSet", "drive", "run_jobs",
]
