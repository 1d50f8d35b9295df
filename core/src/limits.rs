//! Every numeric limit of the specifications (the local API's and the connector protocol's), in
//! one place so each is tested at its boundary and no crate keeps a copy.

use std::time::Duration;

/// Largest request body, counted before any handler runs.
pub const MAX_BODY_BYTES: usize = 3_000_000;
/// Records a store may hold (sessions, previews, jobs) after expired ones are purged.
pub const MAX_RECORDS: usize = 1000;
/// Events the audit ring keeps.
pub const MAX_AUDIT_EVENTS: usize = 1000;
/// Default and largest `limit` of the audit route.
pub const DEFAULT_AUDIT_LIMIT: usize = 100;
/// Simulated jobs that may be pending or running at once.
pub const MAX_ACTIVE_JOBS: usize = 16;

/// Lifetime of a session.
pub const SESSION_LIFETIME: Duration = Duration::from_secs(3600);
/// Lifetime of an action preview (and the longest a grant can outlive its confirmation).
pub const PREVIEW_LIFETIME: Duration = Duration::from_secs(300);
/// How long a job record is kept after it was created.
pub const JOB_LIFETIME: Duration = Duration::from_secs(600);
/// How long a simulated job runs before it succeeds.
pub const JOB_RUN_TIME: Duration = Duration::from_millis(250);

/// An observation at least this old is stale.
pub const MAX_OBSERVATION_AGE: Duration = Duration::from_secs(60);
/// An observation further than this in the future is refused.
pub const MAX_OBSERVATION_SKEW: Duration = Duration::from_secs(5);
/// The longest a provider may think about one observation.
pub const MAX_PROVIDER_BUDGET: Duration = Duration::from_secs(52);
/// Reserve kept back from the freshness window for the reply to reach the client.
pub const PROVIDER_BUDGET_RESERVE: Duration = Duration::from_secs(8);

/// Prompt length in characters.
pub const MAX_PROMPT_CHARS: usize = 4000;
/// OCR text length in characters.
pub const MAX_TEXT_CHARS: usize = 16_000;
/// Elements one observation may carry.
pub const MAX_ELEMENTS: usize = 200;
/// Label length in characters.
pub const MAX_LABEL_CHARS: usize = 256;
/// Role length in characters.
pub const MAX_ROLE_CHARS: usize = 64;
/// Identifier length in characters.
pub const MAX_IDENTIFIER_CHARS: usize = 128;
/// Largest declared observation side.
pub const MAX_OBSERVATION_SIDE: u32 = 16_384;
/// Lowest confidence a target may have.
pub const MIN_TARGET_CONFIDENCE: f64 = 0.8;
/// Instruction length in characters.
pub const MAX_INSTRUCTION_CHARS: usize = 4000;
/// Citations one result may carry.
pub const MAX_CITATIONS: usize = 20;
/// Citation source length in characters.
pub const MAX_CITATION_SOURCE_CHARS: usize = 2048;
/// Remaining-work text length in characters.
pub const MAX_REMAINING_WORK_CHARS: usize = 1000;
/// Length of a value typed into a field.
pub const MAX_INPUT_VALUE_CHARS: usize = 1000;
/// Highest step number of a task.
pub const MAX_TASK_STEP: u32 = 10_000;
/// Earlier steps a task may report.
pub const MAX_TASK_HISTORY: usize = 16;
/// Length of a task's user input in characters.
pub const MAX_USER_INPUT_CHARS: usize = 1000;
/// Steps one plan segment may hold.
pub const MAX_PLAN_STEPS: usize = 32;
/// Length of a plan step's instruction, a boundary's reason and a replan reason in characters.
pub const MAX_PLAN_TEXT_CHARS: usize = 500;
/// Length of what a plan boundary says is needed, in characters.
pub const MAX_BOUNDARY_NEEDED_CHARS: usize = 1000;
/// Free text of the element metadata fields.
pub const MAX_HELP_TEXT_CHARS: usize = 256;
/// Item status text of an element.
pub const MAX_ITEM_STATUS_CHARS: usize = 128;
/// Scroll directions one element may list.
pub const MAX_SCROLL_DIRECTIONS: usize = 4;

/// Tool name length of a preview.
pub const MAX_TOOL_CHARS: usize = 64;
/// Work item description length.
pub const MAX_DESCRIPTION_CHARS: usize = 4000;
/// Grant token length accepted by execute.
pub const MAX_GRANT_TOKEN_CHARS: usize = 256;
/// Random bytes in a grant token.
pub const GRANT_TOKEN_BYTES: usize = 32;
/// Response modes one assist request may list.
pub const MAX_RESPONSE_MODES: usize = 3;
/// Image reference length of an assist context.
pub const MAX_IMAGE_REF_CHARS: usize = 2048;

/// Diagnostic log size before it rotates.
pub const DIAGNOSTIC_LOG_MAX_BYTES: u64 = 1_000_000;
/// Rotated diagnostic logs kept.
pub const DIAGNOSTIC_LOG_BACKUPS: u32 = 2;

/// Accessibility nodes one window walk may visit (the original's UI Automation cap).
pub const A11Y_MAX_NODES: usize = 2000;
/// Deepest accessibility level one window walk descends to.
pub const A11Y_MAX_DEPTH: usize = 64;
/// Wall-clock limit of one window walk, including waiting for a toolkit to register.
pub const A11Y_DEADLINE: Duration = Duration::from_secs(10);

/// Largest WebSocket message the connector sends or accepts: PROTOCOL.md's 16 MiB, the platform
/// relay's envelope cap.
pub const MAX_FRAME_BYTES: usize = 16 * 1024 * 1024;
/// Commands running at once on a connector's machine when `max_concurrent_commands` is not
/// configured (the reference's 10).
pub const DEFAULT_MAX_CONCURRENT_COMMANDS: u32 = 10;
/// Commands started per sliding minute when `max_commands_per_minute` is not configured (the
/// reference's 60).
pub const DEFAULT_MAX_COMMANDS_PER_MINUTE: u32 = 60;
/// Screenshots per sliding minute (the reference's 10), the default of
/// `max_screenshots_per_minute`.
pub const SCREENSHOTS_PER_MINUTE: u32 = 10;
