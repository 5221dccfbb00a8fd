//! Findings about waits on the outside (issue 21 §8): a child run's answer taken by a
//! workflow that never delegates (SAAP018; a process's `AgentWorkEvent` too), a wait on a person the workflow asked that
//! nothing ends but the answer (SAAP019), a child's failure no step takes (SAAP020), and a
//! step that takes a deadline beside what it stands in for and runs for both (SAAP021), and
//! a step that delegates to an agent the workflow does not know (SAAP022).
//!
//! A human's or bot's answer type is also how a workflow declares any event sent from outside
//! (`send RUN`; SAAP002's fix says so), so neither check fires on one unless a step asks a
//! person: only a child run's end is always the answer to a request.

use super::*;

/// The roots of a child run's end as its parent receives it, each with the request that
/// starts the child it answers: an agent's, and a process's work request to an agent.
const CHILD_ANSWERS: &[(&str, &str)] = &[
    ("AgentInTheLoopResponseEvent", DELEGATION),
    ("AgentInTheLoopExceptionEvent", DELEGATION),
    ("AgentWorkEvent", "AgentWorkRequestEvent"),
];

/// The root of a child run's failure (or cancellation) as its parent receives it.
const CHILD_FAILURE: &str = "AgentInTheLoopExceptionEvent";

/// The root of a child run's answer.
const CHILD_ANSWER: &str = "AgentInTheLoopResponseEvent";

/// The request that starts a child run.
const DELEGATION: &str = "AgentInTheLoopRequestEvent";

/// The roots of a person's answer: a human's, one given through a bot (Slack, Teams), or a
/// person's work for a process.
const PERSON_ANSWERS: &[&str] = &[
    "HumanInTheLoopResponseEvent",
    "BotInTheLoopResponseEvent",
    "HumanWorkEvent",
];

/// The roots of a question to a person.
const PERSON_REQUESTS: &[&str] = &[
    "HumanInTheLoopRequestEvent",
    "BotInTheLoopRequestEvent",
    "HumanWorkRequestEvent",
];

impl Analysis<'_> {
    fn is_a(&self, t: TypeId, root: &str) -> bool {
        self.spec.hierarchy.is_subtype_of(self.name(t), root)
    }

    /// Whether some step returns a request of `root` (or a subtype).
    fn asks(&self, root: &str) -> bool {
        self.outs.iter().flatten().any(|&t| self.is_a(t, root))
    }

    /// SAAP018: a parameter takes a child run's end, and no step delegates.
    pub(super) fn responses_without_requests(&self, out: &mut Out) {
        let unasked_roots: Vec<(&str, &str)> = CHILD_ANSWERS
            .iter()
            .copied()
            .filter(|(_, request)| !self.asks(request))
            .collect();
        if unasked_roots.is_empty() {
            return;
        }
        for (si, s) in self.spec.steps.iter().enumerate() {
            for (pi, p) in s.params.iter().enumerate() {
                let mut request = DELEGATION;
                let unasked: Vec<TypeId> = p
                    .types
                    .iter()
                    .copied()
                    .filter(|&t| {
                        let root = unasked_roots.iter().find(|(root, _)| self.is_a(t, root));
                        if let Some((_, r)) = root {
                            request = r;
                        }
                        root.is_some()
                    })
                    .collect();
                if unasked.is_empty() {
                    continue;
                }
                out.push(
                    &RESPONSE_WITHOUT_REQUEST,
                    self,
                    Some(si),
                    Some(pi),
                    format!(
                        "`{}` takes {}, the end of a child run, but no step delegates (returns an `{request}`): no child is ever started, so none ever answers",
                        s.name,
                        self.names(&unasked),
                    ),
                    "seed 002, DESIGN §8: an agent's answer reaches a run only as the end of a child run it started by returning an `AgentInTheLoopRequestEvent`; the engine makes these events, nothing else sends them",
                    format!(
                        "return the request from the step that needs the answer (`{request}::new(\"Agent\", &start)`; a subtype of `{request}` in a spec), or remove the parameter"
                    ),
                );
            }
        }
    }

    /// SAAP019: in a workflow that asks a person, a step that must have a person's answer and
    /// can have nothing else in its place: if nobody answers, the run waits forever.
    pub(super) fn waits_without_deadline(&self, out: &mut Out) {
        // Only a workflow that asks a person waits on one (otherwise the answer type is how
        // it names an event sent from outside).
        if !PERSON_REQUESTS.iter().any(|r| self.asks(r)) {
            return;
        }
        for (si, s) in self.spec.steps.iter().enumerate() {
            for (pi, p) in s.params.iter().enumerate() {
                if !matches!(p.kind, ParamKind::Required | ParamKind::FixedList) {
                    continue;
                }
                let only_people = !p.types.is_empty()
                    && p.types
                        .iter()
                        .all(|&t| PERSON_ANSWERS.iter().any(|root| self.is_a(t, root)));
                if !only_people {
                    continue;
                }
                out.push(
                    &WAIT_WITHOUT_DEADLINE,
                    self,
                    Some(si),
                    Some(pi),
                    format!(
                        "`{}` cannot run until a person answers ({}), and nothing else can take the answer's place: if nobody answers, the run waits forever",
                        s.name,
                        self.names(&p.types)
                    ),
                    "DESIGN §8: a timeout is an event; a wait on a person ends without the answer only if the step can take something else in its place (a deadline's event) — otherwise only a cancel ends it",
                    "give the wait a deadline: have the asking step also return `Delayed::after(duration, TimedOut { … })` and take `Either<Answer, TimedOut>` (a parameter whose types include the timeout event); or accept the open wait and cancel stale runs (`<agent> cancel RUN`)".to_string(),
                );
            }
        }
    }

    /// SAAP021: a parameter takes a deadline — an event some step returns for later delivery
    /// (a timer) — together with other types (the answer it stands in for), and nothing
    /// keeps its step to one decision: when both come (an answer after the deadline, or the
    /// deadline while the answer's decision runs), the step runs for each.
    pub(super) fn deadlines_deciding_twice(&self, out: &mut Out) {
        let delayed: BTreeSet<TypeId> = self
            .spec
            .steps
            .iter()
            .flat_map(|s| s.delayed.iter().copied())
            .collect();
        if delayed.is_empty() {
            return;
        }
        for (si, s) in self.spec.steps.iter().enumerate() {
            // One execution at most, or a precondition that can say no to the second.
            if s.max_executions_per_run == Some(1) || s.precondition.is_some() {
                continue;
            }
            for (pi, p) in s.params.iter().enumerate() {
                if !matches!(p.kind, ParamKind::Required | ParamKind::Optional) {
                    continue;
                }
                let (deadlines, others): (Vec<TypeId>, Vec<TypeId>) =
                    p.types.iter().partition(|t| delayed.contains(t));
                if deadlines.is_empty() || others.is_empty() {
                    continue;
                }
                let setters: Vec<&str> = self
                    .spec
                    .steps
                    .iter()
                    .filter(|o| o.delayed.iter().any(|t| deadlines.contains(t)))
                    .map(|o| o.name.as_str())
                    .collect();
                out.push(
                    &DEADLINE_DECIDES_TWICE,
                    self,
                    Some(si),
                    Some(pi),
                    format!(
                        "`{}` takes the deadline {} (a timer `{}` sets) in place of {}: when both come — the answer after the deadline, or the deadline while the answer's decision still runs — `{}` runs for each and decides twice",
                        s.name,
                        self.names(&deadlines),
                        setters.join("`, `"),
                        self.names(&others),
                        s.name,
                    ),
                    "DESIGN §8, R2: a timer is dropped only when the run ends; until then its event arrives like any other and starts the steps that take it, so an answer and its deadline are two triggers",
                    format!(
                        "let whichever comes first decide: `max_executions_per_run: 1` on `{}` (`#[step(max_executions_per_run = 1)]`, `Step::max_executions_per_run(1)`); ending the run in `{}` drops the timer but leaves the race while it runs",
                        s.name, s.name
                    ),
                );
            }
        }
    }

    /// SAAP020: a workflow that delegates takes a child's answer, and no step takes a
    /// child's failure: a child that fails or is cancelled leaves the run with an unmet
    /// obligation, waiting for an answer that will not come.
    pub(super) fn child_failures_untaken(&self, out: &mut Out) {
        if !self.asks(DELEGATION) {
            return;
        }
        let takes = |root: &str| {
            self.spec
                .steps
                .iter()
                .flat_map(|s| &s.params)
                .any(|p| p.types.iter().any(|&t| self.is_a(t, root)))
        };
        if takes(CHILD_FAILURE) {
            return;
        }
        for (si, s) in self.spec.steps.iter().enumerate() {
            for (pi, p) in s.params.iter().enumerate() {
                let answers: Vec<TypeId> = p
                    .types
                    .iter()
                    .copied()
                    .filter(|&t| self.is_a(t, CHILD_ANSWER))
                    .collect();
                if answers.is_empty() {
                    continue;
                }
                out.push(
                    &CHILD_FAILURE_UNTAKEN,
                    self,
                    Some(si),
                    Some(pi),
                    format!(
                        "`{}` takes a child run's answer ({}), and no step takes a child's failure (`{CHILD_FAILURE}`): a child that fails or is cancelled leaves the run waiting for an answer that will not come",
                        s.name,
                        self.names(&answers),
                    ),
                    "DESIGN §8: a child's end reaches its parent as its answer or as its failure; an end no step takes is recorded as an unmet obligation and the run waits on (`waiting_unmet`) until a cancel or an event from outside moves it",
                    format!(
                        "take both ends where the answer is taken: `Either<{CHILD_ANSWER}, {CHILD_FAILURE}>` (a parameter whose types include both), or a step of its own that takes `{CHILD_FAILURE}` and ends the run or tries again"
                    ),
                );
            }
        }
    }

    /// SAAP022: a step declares it delegates to an agent (`delegates_to`) that is neither
    /// the workflow itself nor among the agents it knows (`agents`): in process the request
    /// fails the step (no engine of that agent), on NATS it is answered at once with an
    /// exception (no worker of that class) — unless a worker of it runs that the workflow
    /// did not name, hence a warning.
    pub(super) fn delegations_to_unknown_agents(&self, out: &mut Out) {
        let source = &self.spec.source;
        let known = |a: &str| a == source.name || source.agents.iter().any(|k| k == a);
        for (si, s) in source.steps.iter().enumerate() {
            let unknown: Vec<&str> = s
                .delegates_to
                .iter()
                .map(String::as_str)
                .filter(|a| !known(a))
                .collect();
            if unknown.is_empty() {
                continue;
            }
            let listed = |names: &[&str]| {
                names
                    .iter()
                    .map(|n| format!("`{n}`"))
                    .collect::<Vec<_>>()
                    .join(", ")
            };
            let knows: Vec<&str> = std::iter::once(source.name.as_str())
                .chain(source.agents.iter().map(String::as_str))
                .collect();
            out.push(
                &DELEGATION_TO_UNKNOWN_AGENT,
                self,
                Some(si),
                None,
                format!(
                    "`{}` delegates to {}, which the workflow does not know (it knows {})",
                    s.name,
                    listed(&unknown),
                    listed(&knows)
                ),
                "DESIGN §8: a child run is started by the engine of the agent its request names — in this process (`with_delegate`, `Engine::delegate_to`) or a worker of that class on NATS; with neither, the request fails the step (SAAP-E013) or is answered at once with a 502 exception, and the run never gets the work done",
                format!(
                    "correct the name, or declare the agent: `Workflow::with_delegate(its_workflow)` to run it in this process, `Workflow::knows_agents([\"{}\"])` for one served by other workers (`agents: [{}]` in a spec)",
                    unknown[0],
                    unknown.join(", ")
                ),
            );
        }
    }
}
