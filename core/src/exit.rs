//! The exit codes natsprobe promises; the README's table is tested against this enum.

use crate::rules::check::Health;

/// Every way a run can end. The kubelet treats any non-zero code as a failed probe;
/// the codes exist for humans and scripts (`diagnose`, CronJobs) that branch on them.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Exit {
    /// The check passed.
    Healthy = 0,
    /// The check found a fault a restart is expected to fix.
    Unhealthy = 1,
    /// The flags or environment are wrong; nothing was inspected.
    Usage = 2,
    /// The check could not be carried out (unreadable /proc, deadline hit, internal error).
    CannotEvaluate = 3,
}

impl Exit {
    /// The rows of the README's exit code table, in order.
    pub const ALL: [Exit; 4] = [
        Exit::Healthy,
        Exit::Unhealthy,
        Exit::Usage,
        Exit::CannotEvaluate,
    ];

    pub fn code(self) -> u8 {
        self as u8
    }

    /// The meaning column of the README's table.
    pub fn meaning(self) -> &'static str {
        match self {
            Exit::Healthy => "healthy",
            Exit::Unhealthy => "unhealthy",
            Exit::Usage => "usage or configuration error",
            Exit::CannotEvaluate => "could not evaluate",
        }
    }
}

impl From<Health> for Exit {
    /// A judged run: healthy 0, unhealthy 1.
    fn from(health: Health) -> Exit {
        match health {
            Health::Healthy => Exit::Healthy,
            Health::Unhealthy => Exit::Unhealthy,
            // Exit 2, as for any setting that turned out wrong when it was used.
            Health::Misconfigured => Exit::Usage,
        }
    }
}
