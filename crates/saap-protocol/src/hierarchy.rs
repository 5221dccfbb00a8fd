//! The event type hierarchy: names, their direct parents, and what follows from them.
//!
//! An event type is identified by its class name (`UserMessageEvent`). Each type has zero or more
//! direct parents that must be registered before it; a type with no parents is a root (in the
//! Python implementation: a direct subclass of `BaseEvent`, which is never listed). From the
//! parents this module derives
//!
//! * the wire list `_parent_event_names` ([`Hierarchy::parent_event_names`]): own name first, then
//!   every ancestor ordered by inheritance depth (longest path to a root), deepest first. Python
//!   leaves the order of equal-depth ancestors unspecified; we fix it (`ControlEvent` before
//!   `DisplayEvent`, otherwise by name) so that the list is stable across processes;
//! * subtyping ([`Hierarchy::is_subtype_of`]), reflexive;
//! * the [`Classification`] (control, display, start, stop, exception), which — as in Python — is
//!   membership of literal names in that list;
//! * resolution of a foreign (unregistered) event name to the first known type among its
//!   received parents ([`Hierarchy::resolve_known_type`]).
//!
//! [`Hierarchy::builtin`] holds every built-in class of the Python core package
//! (`swiss_ai_hub.core.events`); [`Hierarchy::register_agent_package`] adds the blueprint-private
//! classes of the agent package.
//!
//! This module must not know anything about JSON, subjects or dispatch: it is a registry of
//! names. Registration is append-only (no removal, no re-parenting), so a cycle can only arise
//! from a type naming itself, which is rejected.

use std::collections::{BTreeSet, HashMap};

use serde::Serialize;

/// Longest accepted event type name, in bytes.
pub const MAX_NAME_LEN: usize = 256;
/// Deepest accepted inheritance chain (a root has depth 1).
pub const MAX_DEPTH: usize = 64;
/// Most direct parents a type may declare.
pub const MAX_DIRECT_PARENTS: usize = 32;

/// Well-known names of the built-in types that drive classification and dispatch.
pub mod names {
    /// Root of every control event: drives steps, published on JetStream.
    pub const CONTROL_EVENT: &str = "ControlEvent";
    /// Root of every display event: UI/observability only, never dispatched.
    pub const DISPLAY_EVENT: &str = "DisplayEvent";
    /// A control event that is also shown (child of both roots).
    pub const CONTROL_AND_DISPLAY_EVENT: &str = "ControlAndDisplayEvent";
    /// Begins a run.
    pub const START_EVENT: &str = "StartEvent";
    /// Ends a run successfully (any subtype counts).
    pub const STOP_EVENT: &str = "StopEvent";
    /// Ends a run with an error (any subtype counts).
    pub const EXCEPTION_EVENT: &str = "ExceptionEvent";
    /// The usual start event sent by the API for a chat message.
    pub const USER_MESSAGE_EVENT: &str = "UserMessageEvent";
    /// saap's cancellation of a run (DESIGN §8): an `ExceptionEvent` subtype that ends the
    /// run. Not in the Python hierarchy: a Python consumer reads it as its first known
    /// parent, [`EXCEPTION_EVENT`], from [`RUN_CANCELLED_LINEAGE`].
    pub const RUN_CANCELLED_EVENT: &str = "RunCancelledEvent";
    /// Root of the process family (seed 002's `ProcessDispatcher`).
    pub const PROCESS_EVENT: &str = "ProcessEvent";
    /// Work done for a process (by a human, a program or an agent): drives process steps.
    pub const WORK_EVENT: &str = "WorkEvent";
    /// Work a process step hands to a human, a program or an agent.
    pub const WORK_REQUEST_EVENT: &str = "WorkRequestEvent";
    /// Begins a process's run (a walkthrough).
    pub const PROCESS_START_EVENT: &str = "ProcessStartEvent";
    /// Ends a walkthrough successfully.
    pub const PROCESS_STOP_EVENT: &str = "ProcessStopEvent";
    /// Ends a walkthrough with an error.
    pub const PROCESS_EXCEPTION_EVENT: &str = "ProcessExceptionEvent";
    /// `_parent_event_names` of [`RUN_CANCELLED_EVENT`]: its own name, then its ancestors.
    pub const RUN_CANCELLED_LINEAGE: &[&str] = &[
        RUN_CANCELLED_EVENT,
        EXCEPTION_EVENT,
        "SemanticEvent",
        CONTROL_AND_DISPLAY_EVENT,
        CONTROL_EVENT,
        DISPLAY_EVENT,
    ];
}

use names::{
    CONTROL_AND_DISPLAY_EVENT, CONTROL_EVENT, DISPLAY_EVENT, EXCEPTION_EVENT, START_EVENT,
    STOP_EVENT,
};

/// What an event is, derived from the names in its `_parent_event_names` (own name included).
///
/// `control` and `display` may both be true. `start`, `stop` and `exception` are true for the
/// named type and every subtype of it.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default, Serialize)]
pub struct Classification {
    /// `ControlEvent` is among the names: the event drives steps (JetStream, dispatched).
    pub control: bool,
    /// `DisplayEvent` is among the names: the event is shown (core NATS, never dispatched).
    pub display: bool,
    /// `StartEvent` is among the names: the event begins a run.
    pub start: bool,
    /// `StopEvent` is among the names: the event ends a run.
    pub stop: bool,
    /// `ExceptionEvent` is among the names: the event ends a run with an error.
    pub exception: bool,
}

impl Classification {
    /// Classifies by membership of literal names, as the Python implementation does. For a
    /// foreign event this follows the sender's list, not the locally resolved type.
    pub fn from_parent_event_names<S: AsRef<str>>(names: &[S]) -> Classification {
        let mut c = Classification::default();
        for name in names {
            match name.as_ref() {
                CONTROL_EVENT => c.control = true,
                DISPLAY_EVENT => c.display = true,
                START_EVENT => c.start = true,
                STOP_EVENT => c.stop = true,
                EXCEPTION_EVENT => c.exception = true,
                _ => {}
            }
        }
        c
    }

    /// This classification with the roles seed 002's process dispatcher gives the process
    /// family (`names`: the type's `_parent_event_names`): it executes process steps on
    /// `WorkEvent`s and publishes the `WorkRequestEvent`s they return, so both are control
    /// events of a process; a `ProcessStartEvent` begins a walkthrough (a process's run), a
    /// `ProcessStopEvent` ends it, a `ProcessExceptionEvent` ends it with an error. The
    /// Python classification gives these types no role at all (they never reach an agent's
    /// dispatcher), which [`Classification::from_parent_event_names`] keeps.
    pub fn with_process_roles<S: AsRef<str>>(mut self, names: &[S]) -> Classification {
        for name in names {
            match name.as_ref() {
                names::WORK_EVENT | names::WORK_REQUEST_EVENT => self.control = true,
                names::PROCESS_START_EVENT => self.start = true,
                names::PROCESS_STOP_EVENT => self.stop = true,
                names::PROCESS_EXCEPTION_EVENT => self.exception = true,
                _ => {}
            }
        }
        self
    }

    /// True for stop and exception events: appending one terminates the run.
    pub fn is_terminal(&self) -> bool {
        self.stop || self.exception
    }
}

/// Why a type could not be registered.
#[derive(thiserror::Error, Debug, Clone, PartialEq, Eq)]
pub enum HierarchyError {
    /// The name is already registered (built-in or earlier registration).
    #[error(
        "event type `{name}` is already registered; pick another name (built-in names are reserved)"
    )]
    Duplicate {
        /// The name registered twice.
        name: String,
    },
    /// A parent has not been registered yet.
    #[error(
        "event type `{name}` names parent `{parent}`, which is not registered; register `{parent}` first or fix the spelling"
    )]
    UnknownParent {
        /// The type being registered.
        name: String,
        /// The missing parent.
        parent: String,
    },
    /// The name (of the type or of a parent) is not a valid event type name.
    #[error("invalid event type name {name:?}: {reason}")]
    InvalidName {
        /// The offending name.
        name: String,
        /// What is wrong with it and what is allowed.
        reason: NameError,
    },
    /// The type lists itself as a parent.
    #[error(
        "event type `{name}` lists itself as a parent; an event type cannot inherit from itself"
    )]
    Cycle {
        /// The self-referencing type.
        name: String,
    },
    /// The inheritance chain would be deeper than [`MAX_DEPTH`].
    #[error(
        "event type `{name}` would be {depth} levels deep, more than the limit of {max}; flatten the hierarchy"
    )]
    TooDeep {
        /// The type being registered.
        name: String,
        /// Its depth (a root has depth 1).
        depth: usize,
        /// The limit.
        max: usize,
    },
    /// More than [`MAX_DIRECT_PARENTS`] direct parents.
    #[error(
        "event type `{name}` declares {count} direct parents, more than the limit of {max}; use an intermediate type"
    )]
    TooManyParents {
        /// The type being registered.
        name: String,
        /// How many parents were given.
        count: usize,
        /// The limit.
        max: usize,
    },
    /// The same parent is listed twice.
    #[error("event type `{name}` lists parent `{parent}` twice; list each parent once")]
    DuplicateParent {
        /// The type being registered.
        name: String,
        /// The repeated parent.
        parent: String,
    },
}

impl HierarchyError {
    /// A stable, machine-readable name of the error kind.
    pub fn kind(&self) -> &'static str {
        match self {
            HierarchyError::Duplicate { .. } => "duplicate",
            HierarchyError::UnknownParent { .. } => "unknown_parent",
            HierarchyError::InvalidName { .. } => "invalid_name",
            HierarchyError::Cycle { .. } => "cycle",
            HierarchyError::TooDeep { .. } => "too_deep",
            HierarchyError::TooManyParents { .. } => "too_many_parents",
            HierarchyError::DuplicateParent { .. } => "duplicate_parent",
        }
    }
}

/// What is wrong with an event type name.
#[derive(thiserror::Error, Debug, Clone, Copy, PartialEq, Eq)]
pub enum NameError {
    /// The name is empty.
    #[error("the name is empty")]
    Empty,
    /// The name is longer than [`MAX_NAME_LEN`] bytes.
    #[error("the name is longer than {MAX_NAME_LEN} bytes")]
    TooLong,
    /// The first character is not a letter or `_`.
    #[error("the name must start with a letter or `_`")]
    BadStart,
    /// A character outside letters, digits, `_` and the generic brackets `[`, `]`, `,`.
    /// Dots, whitespace, `*` and `>` in particular would break NATS subjects.
    #[error(
        "the name contains {0:?}; allowed are letters, digits, `_`, and `[`, `]`, `,` for generic names (no dots, whitespace or wildcards)"
    )]
    BadChar(char),
    /// `[` and `]` do not pair up.
    #[error("the brackets of the generic name do not balance")]
    UnbalancedBrackets,
}

/// Checks that `name` can be an event type name: non-empty, at most [`MAX_NAME_LEN`] bytes,
/// starting with a letter or `_`, then letters, digits, `_`, or the brackets and commas of a
/// pydantic generic name such as `HumanInTheLoopResponseEvent[HumanInTheLoopInputRequestEvent]`.
/// Such a name is always a valid NATS subject token.
pub fn validate_name(name: &str) -> Result<(), NameError> {
    if name.is_empty() {
        return Err(NameError::Empty);
    }
    if name.len() > MAX_NAME_LEN {
        return Err(NameError::TooLong);
    }
    let mut chars = name.chars();
    match chars.next() {
        Some(c) if c.is_alphabetic() || c == '_' => {}
        _ => return Err(NameError::BadStart),
    }
    let mut open: usize = 0;
    for c in chars {
        match c {
            '[' => open += 1,
            ']' => {
                open = open.checked_sub(1).ok_or(NameError::UnbalancedBrackets)?;
            }
            ',' if open > 0 => {}
            c if c.is_alphanumeric() || c == '_' => {}
            c => return Err(NameError::BadChar(c)),
        }
    }
    if open != 0 {
        return Err(NameError::UnbalancedBrackets);
    }
    Ok(())
}

#[derive(Clone, Debug)]
struct Node {
    parents: Vec<String>,
    depth: usize,
    /// Own name first, then ancestors by depth descending (the wire list).
    lineage: Vec<String>,
    /// Own name and every ancestor, for subtype queries.
    ancestry: BTreeSet<String>,
    classification: Classification,
}

/// A registry of event types and their parents. Append-only; cheap to clone.
#[derive(Clone, Debug, Default)]
pub struct Hierarchy {
    nodes: HashMap<String, Node>,
    /// Registration order, for deterministic iteration.
    order: Vec<String>,
}

/// The tie order of equal-depth ancestors: `ControlEvent` before `DisplayEvent`, then by name.
fn tie_rank(name: &str) -> u8 {
    match name {
        CONTROL_EVENT => 0,
        DISPLAY_EVENT => 1,
        _ => 2,
    }
}

impl Hierarchy {
    /// An empty hierarchy (no built-ins). Most callers want [`Hierarchy::builtin`].
    pub fn new() -> Hierarchy {
        Hierarchy::default()
    }

    /// Every built-in class of the Python core package (notes §1.5), with its parents.
    pub fn builtin() -> Hierarchy {
        let mut h = Hierarchy::new();
        h.register_table(CORE_TYPES);
        h
    }

    /// [`Hierarchy::builtin`] plus the agent package's blueprint-private classes.
    pub fn builtin_with_agent_package() -> Hierarchy {
        let mut h = Hierarchy::builtin();
        h.register_agent_package();
        h
    }

    /// Adds the blueprint-private classes of the Python agent package (`AnswerStopEvent`,
    /// `AskExpertStartEvent`, …). Names already registered are left as they are.
    pub fn register_agent_package(&mut self) {
        self.register_table(AGENT_PACKAGE_TYPES);
    }

    fn register_table(&mut self, table: &[(&[&str], &[&str])]) {
        for (group, parents) in table {
            for name in *group {
                if self.contains(name) {
                    continue;
                }
                // The tables are checked by a unit test (`builtin_tables_register_cleanly`);
                // a failure here would only skip the entry, never panic.
                let _ = self.register(name, parents);
            }
        }
    }

    /// Registers `name` with its direct parents, which must already be registered.
    ///
    /// An empty `direct_parents` makes a root type. Names must pass [`validate_name`].
    pub fn register(&mut self, name: &str, direct_parents: &[&str]) -> Result<(), HierarchyError> {
        validate_name(name).map_err(|reason| HierarchyError::InvalidName {
            name: name.to_owned(),
            reason,
        })?;
        if self.nodes.contains_key(name) {
            return Err(HierarchyError::Duplicate {
                name: name.to_owned(),
            });
        }
        if direct_parents.len() > MAX_DIRECT_PARENTS {
            return Err(HierarchyError::TooManyParents {
                name: name.to_owned(),
                count: direct_parents.len(),
                max: MAX_DIRECT_PARENTS,
            });
        }
        let mut depth = 1;
        let mut ancestry = BTreeSet::new();
        for (i, parent) in direct_parents.iter().enumerate() {
            if *parent == name {
                return Err(HierarchyError::Cycle {
                    name: name.to_owned(),
                });
            }
            validate_name(parent).map_err(|reason| HierarchyError::InvalidName {
                name: (*parent).to_owned(),
                reason,
            })?;
            if direct_parents[..i].contains(parent) {
                return Err(HierarchyError::DuplicateParent {
                    name: name.to_owned(),
                    parent: (*parent).to_owned(),
                });
            }
            let Some(node) = self.nodes.get(*parent) else {
                return Err(HierarchyError::UnknownParent {
                    name: name.to_owned(),
                    parent: (*parent).to_owned(),
                });
            };
            depth = depth.max(node.depth + 1);
            ancestry.extend(node.ancestry.iter().cloned());
        }
        if depth > MAX_DEPTH {
            return Err(HierarchyError::TooDeep {
                name: name.to_owned(),
                depth,
                max: MAX_DEPTH,
            });
        }
        let mut ancestors: Vec<(usize, &String)> = ancestry
            .iter()
            .map(|a| (self.nodes.get(a).map_or(0, |n| n.depth), a))
            .collect();
        ancestors.sort_by(|(da, a), (db, b)| {
            db.cmp(da)
                .then_with(|| tie_rank(a).cmp(&tie_rank(b)))
                .then_with(|| a.cmp(b))
        });
        let mut lineage = Vec::with_capacity(ancestors.len() + 1);
        lineage.push(name.to_owned());
        lineage.extend(ancestors.into_iter().map(|(_, a)| a.clone()));
        ancestry.insert(name.to_owned());
        let classification = Classification::from_parent_event_names(&lineage);
        self.nodes.insert(
            name.to_owned(),
            Node {
                parents: direct_parents.iter().map(|p| (*p).to_owned()).collect(),
                depth,
                lineage,
                ancestry,
                classification,
            },
        );
        self.order.push(name.to_owned());
        Ok(())
    }

    /// Whether `name` is registered.
    pub fn contains(&self, name: &str) -> bool {
        self.nodes.contains_key(name)
    }

    /// The direct parents of `name` as registered, or `None` if unknown.
    pub fn direct_parents(&self, name: &str) -> Option<&[String]> {
        self.nodes.get(name).map(|n| n.parents.as_slice())
    }

    /// The inheritance depth of `name` (a root has depth 1), or `None` if unknown.
    pub fn depth(&self, name: &str) -> Option<usize> {
        self.nodes.get(name).map(|n| n.depth)
    }

    /// The wire `_parent_event_names` of `name`: own name first, then ancestors by depth
    /// descending (equal depth: `ControlEvent` before `DisplayEvent`, otherwise by name).
    pub fn parent_event_names(&self, name: &str) -> Option<Vec<String>> {
        self.lineage(name).map(<[String]>::to_vec)
    }

    /// Borrowing form of [`Hierarchy::parent_event_names`].
    pub fn lineage(&self, name: &str) -> Option<&[String]> {
        self.nodes.get(name).map(|n| n.lineage.as_slice())
    }

    /// Whether `name` is `ancestor` or inherits from it. False if either is unknown.
    pub fn is_subtype_of(&self, name: &str, ancestor: &str) -> bool {
        self.nodes
            .get(name)
            .is_some_and(|n| n.ancestry.contains(ancestor))
    }

    /// The classification of a registered type, or `None` if unknown.
    pub fn classify(&self, name: &str) -> Option<Classification> {
        self.nodes.get(name).map(|n| n.classification)
    }

    /// Every registered name, in registration order.
    pub fn names(&self) -> impl Iterator<Item = &str> {
        self.order.iter().map(String::as_str)
    }

    /// Number of registered types.
    pub fn len(&self) -> usize {
        self.order.len()
    }

    /// Whether nothing is registered.
    pub fn is_empty(&self) -> bool {
        self.order.is_empty()
    }

    /// The local type an event named `event_name` with the received `parent_event_names` is
    /// handled as (Python's `deserialize_event`, notes §1.3):
    ///
    /// 1. `event_name` itself if registered;
    /// 2. otherwise the first registered name of `parent_event_names`, **in received order**,
    ///    except that `ControlEvent` (resp. `DisplayEvent`) becomes `ControlAndDisplayEvent` when
    ///    the other root is also in the list and `ControlAndDisplayEvent` is registered;
    /// 3. `None` if no name is known (Python then falls back to the class it was asked to
    ///    decode with; the caller decides).
    ///
    /// Unlike Python, no field validation is tried per candidate: the first known name wins.
    pub fn resolve_known_type<'a, S: AsRef<str>>(
        &'a self,
        event_name: &str,
        parent_event_names: &[S],
    ) -> Option<&'a str> {
        if let Some((k, _)) = self.nodes.get_key_value(event_name) {
            return Some(k.as_str());
        }
        let has = |wanted: &str| parent_event_names.iter().any(|n| n.as_ref() == wanted);
        for candidate in parent_event_names {
            let candidate = candidate.as_ref();
            let Some((k, _)) = self.nodes.get_key_value(candidate) else {
                continue;
            };
            let other_root = match candidate {
                CONTROL_EVENT => Some(DISPLAY_EVENT),
                DISPLAY_EVENT => Some(CONTROL_EVENT),
                _ => None,
            };
            if let Some(other) = other_root
                && has(other)
                && let Some((both, _)) = self.nodes.get_key_value(CONTROL_AND_DISPLAY_EVENT)
            {
                return Some(both.as_str());
            }
            return Some(k.as_str());
        }
        None
    }
}

type Table = &'static [(&'static [&'static str], &'static [&'static str])];

/// Built-in classes of the core package: (names, their direct parents), parents before children.
const CORE_TYPES: Table = &[
    (&["ControlEvent", "DisplayEvent"], &[]),
    (
        &["ControlAndDisplayEvent"],
        &["ControlEvent", "DisplayEvent"],
    ),
    (&["StartEvent"], &["ControlAndDisplayEvent"]),
    (
        &[
            "UserMessageEvent",
            "CronStartEvent",
            "RAGStartEvent",
            "StoreUserMemoryRequestedEvent",
        ],
        &["StartEvent"],
    ),
    (&["StopEvent"], &["ControlAndDisplayEvent"]),
    (&["RAGStopEvent"], &["StopEvent"]),
    (
        &["RAGSuccessStopEvent", "RAGFailureStopEvent"],
        &["RAGStopEvent"],
    ),
    (&["SemanticEvent"], &["ControlAndDisplayEvent"]),
    (&["ExceptionEvent", "LLMEvent"], &["SemanticEvent"]),
    (&["LLMStopEvent"], &["LLMEvent", "StopEvent"]),
    (&["RefusalStopEvent"], &["LLMStopEvent"]),
    (
        &[
            "AgentEvent",
            "ChainEvent",
            "EmbeddingEvent",
            "RerankerEvent",
            "RetrieverEvent",
            "ToolEvent",
            "GuardEvent",
        ],
        &["SemanticEvent"],
    ),
    (
        &["GuardAcceptEvent", "GuardRejectionEvent"],
        &["GuardEvent"],
    ),
    (
        &[
            "AgentSuitabilityAcceptEvent",
            "ContextSufficientAcceptEvent",
            "FewShotAcceptEvent",
            "SensitiveInfoAcceptEvent",
        ],
        &["GuardAcceptEvent"],
    ),
    (
        &[
            "AgentSuitabilityRejectEvent",
            "ContextInsufficientRejectEvent",
            "ExpertRejectEvent",
            "FewShotRejectEvent",
            "SensitiveInfoRejectEvent",
        ],
        &["GuardRejectionEvent"],
    ),
    (&["HumanInTheLoopRequestEvent"], &["ControlAndDisplayEvent"]),
    (
        &[
            "HumanInTheLoopInputRequestEvent",
            "HumanInTheLoopConfirmationRequestEvent",
            "HumanInTheLoopChatRequestEvent",
        ],
        &["HumanInTheLoopRequestEvent"],
    ),
    (
        &["ToolApprovalRequestEvent"],
        &["HumanInTheLoopConfirmationRequestEvent"],
    ),
    (
        &["HumanInTheLoopResponseEvent"],
        &["ControlAndDisplayEvent"],
    ),
    (
        &[
            "HumanInTheLoopResponseEvent[HumanInTheLoopInputRequestEvent]",
            "HumanInTheLoopResponseEvent[HumanInTheLoopConfirmationRequestEvent]",
            "HumanInTheLoopResponseEvent[HumanInTheLoopChatRequestEvent]",
            "HumanInTheLoopResponseEvent[ToolApprovalRequestEvent]",
        ],
        &["HumanInTheLoopResponseEvent"],
    ),
    (
        &["HumanInTheLoopInputResponseEvent"],
        &["HumanInTheLoopResponseEvent[HumanInTheLoopInputRequestEvent]"],
    ),
    (
        &["HumanInTheLoopConfirmationResponseEvent"],
        &["HumanInTheLoopResponseEvent[HumanInTheLoopConfirmationRequestEvent]"],
    ),
    (
        &["HumanInTheLoopChatResponseEvent"],
        &["HumanInTheLoopResponseEvent[HumanInTheLoopChatRequestEvent]"],
    ),
    (
        &["ToolApprovalResponseEvent"],
        &["HumanInTheLoopResponseEvent[ToolApprovalRequestEvent]"],
    ),
    // Inherits `DisplayEvent, ControlEvent` directly, not `ControlAndDisplayEvent`.
    (
        &["AgentInTheLoopRequestEvent"],
        &["DisplayEvent", "ControlEvent"],
    ),
    (
        &[
            "AgentInTheLoopResponseEvent",
            "AgentInTheLoopExceptionEvent",
        ],
        &["ControlAndDisplayEvent"],
    ),
    (
        &[
            "BotInTheLoopRequestEvent",
            "BotInTheLoopResponseEvent",
            "LanguageEvent",
        ],
        &["ControlEvent"],
    ),
    (
        &[
            "LimitChatHistoryEvent",
            "StandaloneQuestionCondenserEvent",
            "RouterEvent",
            "ContextualizeConversationEvent",
            "ConversationContextualizedEvent",
            "ComposeContextEvent",
            "ContextComposedEvent",
            "CompleteConversationEvent",
            "MetaQuestionDetectedEvent",
            "NotAMetaQuestionEvent",
            "RecallMemoryEvent",
            "MemoryRecalledEvent",
            "MemoryStorageRequestedEvent",
            "AddMemoryToChatHistoryEvent",
            "BaseRetrieveMemoryEvent",
            "BaseStoreMemoryEvent",
            "ReadAttachedFilesEvent",
            "AttachedFilesReadEvent",
            "SearchKnowledgeEvent",
            "KnowledgeSearchedEvent",
            "RunToolLoopEvent",
            "ToolCallsDecidedEvent",
            "ToolCallApprovedEvent",
            "ToolResultEvent",
            "ToolLoopIterationEvent",
            "ToolLoopFinishedEvent",
            "UnreadMailListedEvent",
            "MailFetchedEvent",
            "MailMovedEvent",
            "MailBatchClassifiedEvent",
            "MailBatchDraftedEvent",
        ],
        &["ControlAndDisplayEvent"],
    ),
    (
        &[
            "AddUserMemoryToChatHistoryEvent",
            "AddOrganizationMemoryToChatHistoryEvent",
        ],
        &["AddMemoryToChatHistoryEvent"],
    ),
    (
        &["RetrieveUserMemoryEvent", "RetrieveOrganizationMemoryEvent"],
        &["BaseRetrieveMemoryEvent"],
    ),
    (
        &["StoreUserMemoryEvent", "StoreOrganizationMemoryEvent"],
        &["BaseStoreMemoryEvent"],
    ),
    (
        &[
            "ChunkEvent",
            "ThoughtEvent",
            "CostEvent",
            "ConversationTitleEvent",
            "FollowUpQuestionsEvent",
            "AttachedFileEvent",
            "SandboxFileDisplayedEvent",
            "ToolLoopStatusEvent",
            "ToolLoopCondensedEvent",
            "RouteOptions",
        ],
        &["DisplayEvent"],
    ),
    (&["LLMCostEvent"], &["CostEvent"]),
    // Process / discovery / pipeline families: neither control nor display.
    (
        &[
            "ProcessEvent",
            "ClassDiscoveryRequestEvent",
            "AgentClassDiscoveryResponseEvent",
            "ProcessClassDiscoveryResponseEvent",
            "SourceUpdatedEvent",
        ],
        &[],
    ),
    (&["WorkEvent", "WorkRequestEvent"], &["ProcessEvent"]),
    (
        &[
            "ProcessStartEvent",
            "ProcessStopEvent",
            "ProcessExceptionEvent",
            "HumanWorkEvent",
            "ProgramWorkEvent",
            "AgentWorkEvent",
        ],
        &["WorkEvent"],
    ),
    (&["ProcessWorkEvent"], &["ProcessStartEvent"]),
    (
        &[
            "HumanWorkRequestEvent",
            "ProgramWorkRequestEvent",
            "AgentWorkRequestEvent",
        ],
        &["WorkRequestEvent"],
    ),
];

/// Blueprint-private classes of the agent package (notes §1.5, `pkg = agent`).
const AGENT_PACKAGE_TYPES: Table = &[
    (
        &[
            "ClassifyMailStartEvent",
            "DraftMailStartEvent",
            "ReadMailStartEvent",
            "QuestionStartEvent",
        ],
        &["StartEvent"],
    ),
    (
        &[
            "AskExpertEvent",
            "ExpertAnswerSufficientEvent",
            "ExpertAnswerInsufficientEvent",
            "FewShotEvent",
            "GroundedDraftsRequestedEvent",
            "DetermineNamespacesEvent",
            "UserRequestsExpertEvent",
            "ExpertAnswerContextEvent",
        ],
        &["ControlEvent"],
    ),
    (&["AskExpertStartEvent"], &["StartEvent", "AskExpertEvent"]),
    (
        &[
            "AnswerStopEvent",
            "NoAnswerStopEvent",
            "MemoryStoredStopEvent",
        ],
        &["StopEvent"],
    ),
    (
        &["RetrievalResponseEvent"],
        &["RetrieverEvent", "StopEvent"],
    ),
    (&["McpReasoningEvent"], &["LLMEvent"]),
    (&["InOrderNodeCombinerEvent"], &["ControlAndDisplayEvent"]),
    (
        &["ContextInsufficientWithQueryEvent"],
        &["ContextInsufficientRejectEvent"],
    ),
    (
        &["FollowUpQuestionRequestEvent"],
        &["HumanInTheLoopInputRequestEvent"],
    ),
    (
        &["FollowUpQuestionResponseEvent"],
        &["HumanInTheLoopInputResponseEvent"],
    ),
    (
        &["NamespaceApprovalRequestEvent"],
        &["HumanInTheLoopConfirmationRequestEvent"],
    ),
    (
        &["NamespaceApprovalResponseEvent"],
        &["HumanInTheLoopConfirmationResponseEvent"],
    ),
];

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    fn lineage(h: &Hierarchy, name: &str) -> Vec<String> {
        h.parent_event_names(name).unwrap()
    }

    #[test]
    fn builtin_tables_register_cleanly() {
        let mut h = Hierarchy::new();
        for table in [CORE_TYPES, AGENT_PACKAGE_TYPES] {
            for (group, parents) in table {
                for name in *group {
                    h.register(name, parents)
                        .unwrap_or_else(|e| panic!("{name}: {e}"));
                }
            }
        }
        assert_eq!(h.len(), Hierarchy::builtin_with_agent_package().len());
    }

    #[test]
    fn builtin_contains_every_core_class_of_notes_1_5() {
        let h = Hierarchy::builtin();
        for name in [
            "ControlEvent",
            "DisplayEvent",
            "ControlAndDisplayEvent",
            "StartEvent",
            "UserMessageEvent",
            "StopEvent",
            "RAGSuccessStopEvent",
            "ExceptionEvent",
            "LLMStopEvent",
            "RefusalStopEvent",
            "GuardAcceptEvent",
            "SensitiveInfoRejectEvent",
            "MemoryStorageRequestedEvent",
            "HumanInTheLoopChatResponseEvent",
            "AgentInTheLoopRequestEvent",
            "BotInTheLoopResponseEvent",
            "ChunkEvent",
            "ThoughtEvent",
            "LLMCostEvent",
            "ProcessWorkEvent",
            "SourceUpdatedEvent",
        ] {
            assert!(h.contains(name), "{name} missing");
        }
        assert!(!h.contains("AnswerStopEvent"), "agent package is opt-in");
        assert!(Hierarchy::builtin_with_agent_package().contains("AnswerStopEvent"));
    }

    #[test]
    fn parent_event_names_is_own_name_then_ancestors_deepest_first() {
        let h = Hierarchy::builtin();
        assert_eq!(
            lineage(&h, "UserMessageEvent"),
            [
                "UserMessageEvent",
                "StartEvent",
                "ControlAndDisplayEvent",
                "ControlEvent",
                "DisplayEvent"
            ]
        );
        assert_eq!(lineage(&h, "ControlEvent"), ["ControlEvent"]);
    }

    #[test]
    fn the_cancellation_lineage_is_what_the_hierarchy_gives_an_exception_subtype() {
        let mut h = Hierarchy::builtin();
        h.register(names::RUN_CANCELLED_EVENT, &[names::EXCEPTION_EVENT])
            .unwrap();
        assert_eq!(
            lineage(&h, names::RUN_CANCELLED_EVENT),
            names::RUN_CANCELLED_LINEAGE
        );
        let c = Classification::from_parent_event_names(names::RUN_CANCELLED_LINEAGE);
        assert!(c.exception && c.control && !c.stop);
    }

    #[test]
    fn parent_event_names_orders_multiple_inheritance_by_longest_path() {
        let h = Hierarchy::builtin();
        assert_eq!(
            lineage(&h, "RefusalStopEvent"),
            [
                "RefusalStopEvent",
                "LLMStopEvent",
                "LLMEvent",
                "SemanticEvent",
                "StopEvent",
                "ControlAndDisplayEvent",
                "ControlEvent",
                "DisplayEvent"
            ]
        );
    }

    #[test]
    fn parent_event_names_ties_put_control_before_display_then_by_name() {
        let mut h = Hierarchy::builtin();
        assert_eq!(
            lineage(&h, "AgentInTheLoopRequestEvent"),
            ["AgentInTheLoopRequestEvent", "ControlEvent", "DisplayEvent"]
        );
        h.register("Zeta", &["ControlEvent"]).unwrap();
        h.register("Alpha", &["ControlEvent"]).unwrap();
        h.register("Both", &["Zeta", "Alpha", "DisplayEvent"])
            .unwrap();
        assert_eq!(
            lineage(&h, "Both"),
            ["Both", "Alpha", "Zeta", "ControlEvent", "DisplayEvent"]
        );
        // A root named before "ControlEvent" alphabetically still comes after it at equal depth.
        h.register("AaaRoot", &[]).unwrap();
        h.register("Mixed", &["AaaRoot", "DisplayEvent", "ControlEvent"])
            .unwrap();
        assert_eq!(
            lineage(&h, "Mixed"),
            ["Mixed", "ControlEvent", "DisplayEvent", "AaaRoot"]
        );
    }

    #[test]
    fn generic_parametrisations_appear_in_response_lineage() {
        let h = Hierarchy::builtin();
        assert_eq!(
            lineage(&h, "HumanInTheLoopInputResponseEvent"),
            [
                "HumanInTheLoopInputResponseEvent",
                "HumanInTheLoopResponseEvent[HumanInTheLoopInputRequestEvent]",
                "HumanInTheLoopResponseEvent",
                "ControlAndDisplayEvent",
                "ControlEvent",
                "DisplayEvent"
            ]
        );
    }

    #[test]
    fn classification_is_membership_of_literal_names() {
        let h = Hierarchy::builtin();
        let c = h.classify("RAGSuccessStopEvent").unwrap();
        assert!(c.control && c.display && c.stop && !c.start && !c.exception);
        assert!(c.is_terminal());
        let c = h.classify("ExceptionEvent").unwrap();
        assert!(c.exception && c.control && !c.stop);
        let c = h.classify("UserMessageEvent").unwrap();
        assert!(c.start && !c.is_terminal());
        let c = h.classify("ChunkEvent").unwrap();
        assert!(c.display && !c.control);
        let c = h.classify("BotInTheLoopRequestEvent").unwrap();
        assert!(c.control && !c.display);
        assert_eq!(
            h.classify("ProcessEvent").unwrap(),
            Classification::default()
        );
        assert_eq!(h.classify("Nope"), None);
        let roles = |n: &str| {
            let c = h.classify(n).unwrap();
            c.with_process_roles(h.lineage(n).unwrap())
        };
        assert!(roles("ProcessWorkEvent").start && roles("ProcessWorkEvent").control);
        assert!(roles("ProcessStopEvent").stop && !roles("ProcessStopEvent").exception);
        assert!(roles("ProcessExceptionEvent").exception);
        assert!(roles("HumanWorkEvent").control && !roles("HumanWorkEvent").is_terminal());
        assert!(roles("AgentWorkRequestEvent").control && !roles("AgentWorkRequestEvent").display);
        assert_eq!(roles("ProcessEvent"), Classification::default());
        assert_eq!(roles("ChunkEvent"), h.classify("ChunkEvent").unwrap());
        let foreign = Classification::from_parent_event_names(&["X", "StopEvent", "ControlEvent"]);
        assert!(foreign.stop && foreign.control && !foreign.display);
    }

    #[test]
    fn is_subtype_of_is_reflexive_and_transitive() {
        let h = Hierarchy::builtin();
        assert!(h.is_subtype_of("StopEvent", "StopEvent"));
        assert!(h.is_subtype_of("RefusalStopEvent", "StopEvent"));
        assert!(h.is_subtype_of("RefusalStopEvent", "SemanticEvent"));
        assert!(h.is_subtype_of("RefusalStopEvent", "ControlEvent"));
        assert!(!h.is_subtype_of("StopEvent", "RefusalStopEvent"));
        assert!(!h.is_subtype_of("Unknown", "Unknown"));
        assert!(!h.is_subtype_of("StopEvent", "Unknown"));
    }

    #[test]
    fn register_rejects_duplicate_names() {
        let mut h = Hierarchy::builtin();
        let e = h.register("StopEvent", &["ControlEvent"]).unwrap_err();
        assert!(matches!(e, HierarchyError::Duplicate { .. }));
        h.register("Mine", &[]).unwrap();
        assert!(matches!(
            h.register("Mine", &[]),
            Err(HierarchyError::Duplicate { .. })
        ));
    }

    #[test]
    fn register_requires_parents_registered_first() {
        let mut h = Hierarchy::builtin();
        let e = h.register("Child", &["Parent"]).unwrap_err();
        assert_eq!(
            e,
            HierarchyError::UnknownParent {
                name: "Child".into(),
                parent: "Parent".into()
            }
        );
        assert!(
            !h.contains("Child"),
            "a failed registration leaves no trace"
        );
        assert!(e.to_string().contains("register `Parent` first"));
    }

    #[test]
    fn register_rejects_self_parent_as_cycle() {
        let mut h = Hierarchy::builtin();
        assert!(matches!(
            h.register("Loop", &["Loop"]),
            Err(HierarchyError::Cycle { .. })
        ));
    }

    #[test]
    fn register_rejects_duplicate_and_too_many_parents() {
        let mut h = Hierarchy::builtin();
        assert!(matches!(
            h.register("Twice", &["ControlEvent", "ControlEvent"]),
            Err(HierarchyError::DuplicateParent { .. })
        ));
        let many: Vec<String> = (0..=MAX_DIRECT_PARENTS).map(|i| format!("R{i}")).collect();
        for r in &many {
            h.register(r, &[]).unwrap();
        }
        let refs: Vec<&str> = many.iter().map(String::as_str).collect();
        assert!(matches!(
            h.register("Wide", &refs),
            Err(HierarchyError::TooManyParents { .. })
        ));
    }

    #[test]
    fn register_rejects_chains_deeper_than_max_depth() {
        let mut h = Hierarchy::new();
        h.register("L1", &[]).unwrap();
        for i in 2..=MAX_DEPTH {
            let parent = format!("L{}", i - 1);
            h.register(&format!("L{i}"), &[&parent]).unwrap();
        }
        assert_eq!(h.depth(&format!("L{MAX_DEPTH}")), Some(MAX_DEPTH));
        let e = h
            .register("TooDeep", &[&format!("L{MAX_DEPTH}")])
            .unwrap_err();
        assert!(matches!(e, HierarchyError::TooDeep { depth, .. } if depth == MAX_DEPTH + 1));
    }

    #[test]
    fn names_must_be_identifiers_without_dots_whitespace_or_wildcards() {
        assert_eq!(validate_name(""), Err(NameError::Empty));
        assert_eq!(validate_name("a.b"), Err(NameError::BadChar('.')));
        assert_eq!(validate_name("a b"), Err(NameError::BadChar(' ')));
        assert_eq!(validate_name("a*"), Err(NameError::BadChar('*')));
        assert_eq!(validate_name("a>"), Err(NameError::BadChar('>')));
        assert_eq!(validate_name("1abc"), Err(NameError::BadStart));
        assert_eq!(validate_name("a,b"), Err(NameError::BadChar(',')));
        assert_eq!(validate_name("A[B"), Err(NameError::UnbalancedBrackets));
        assert_eq!(validate_name("A]B["), Err(NameError::UnbalancedBrackets));
        assert_eq!(
            validate_name(&"a".repeat(MAX_NAME_LEN + 1)),
            Err(NameError::TooLong)
        );
        assert!(validate_name(&"a".repeat(MAX_NAME_LEN)).is_ok());
        assert!(validate_name("_Private9").is_ok());
        assert!(validate_name("Ereignis_Ä").is_ok());
        assert!(validate_name("Resp[A,B]").is_ok());
        let mut h = Hierarchy::new();
        assert!(matches!(
            h.register("bad.name", &[]),
            Err(HierarchyError::InvalidName { .. })
        ));
    }

    #[test]
    fn names_iterate_in_registration_order() {
        let mut h = Hierarchy::new();
        h.register("B", &[]).unwrap();
        h.register("A", &["B"]).unwrap();
        assert_eq!(h.names().collect::<Vec<_>>(), ["B", "A"]);
        assert_eq!(h.direct_parents("A").unwrap(), ["B".to_string()]);
        assert_eq!(h.direct_parents("C"), None);
    }

    #[test]
    fn resolve_known_type_prefers_own_name_then_first_known_parent_in_received_order() {
        let h = Hierarchy::builtin();
        assert_eq!(
            h.resolve_known_type("StopEvent", &["garbage"]),
            Some("StopEvent")
        );
        assert_eq!(
            h.resolve_known_type(
                "MyStop",
                &[
                    "MyStop",
                    "StopEvent",
                    "ControlAndDisplayEvent",
                    "ControlEvent"
                ]
            ),
            Some("StopEvent")
        );
        // Received order wins, even if it is not depth order.
        assert_eq!(
            h.resolve_known_type("X", &["X", "ControlAndDisplayEvent", "StopEvent"]),
            Some("ControlAndDisplayEvent")
        );
        assert_eq!(h.resolve_known_type("X", &["X", "Y"]), None);
        assert_eq!(h.resolve_known_type::<&str>("X", &[]), None);
    }

    #[test]
    fn resolve_known_type_maps_control_with_display_to_control_and_display() {
        let h = Hierarchy::builtin();
        assert_eq!(
            h.resolve_known_type("X", &["X", "ControlEvent", "DisplayEvent"]),
            Some("ControlAndDisplayEvent")
        );
        assert_eq!(
            h.resolve_known_type("X", &["X", "DisplayEvent", "ControlEvent"]),
            Some("ControlAndDisplayEvent")
        );
        assert_eq!(
            h.resolve_known_type("X", &["X", "ControlEvent"]),
            Some("ControlEvent")
        );
        assert_eq!(
            h.resolve_known_type("X", &["X", "DisplayEvent"]),
            Some("DisplayEvent")
        );
    }
}
