//! Findings about waits on the outside (issue 21 §8): an answer taken that no step asks for
//! (SAAP018), and a wait on a human that nothing ends but the answer (SAAP019).

use super::*;

/// Each response root, with the request root whose answer it is.
const ANSWERS: &[(&str, &str)] = &[
    ("HumanInTheLoopResponseEvent", "HumanInTheLoopRequestEvent"),
    ("AgentInTheLoopResponseEvent", "AgentInTheLoopRequestEvent"),
    ("AgentInTheLoopExceptionEvent", "AgentInTheLoopRequestEvent"),
    ("BotInTheLoopResponseEvent", "BotInTheLoopRequestEvent"),
];

/// The roots of a person's answer: a human's, or one given through a bot (Slack, Teams).
const PERSON_ANSWERS: &[&str] = &["HumanInTheLoopResponseEvent", "BotInTheLoopResponseEvent"];

impl Analysis<'_> {
    fn is_a(&self, t: TypeId, root: &str) -> bool {
        self.spec.hierarchy.is_subtype_of(self.name(t), root)
    }

    /// Whether some step returns a request of `root` (or a subtype).
    fn asks(&self, root: &str) -> bool {
        self.outs.iter().flatten().any(|&t| self.is_a(t, root))
    }

    /// SAAP018: a parameter takes the answer to an in-the-loop request no step returns.
    pub(super) fn responses_without_requests(&self, out: &mut Out) {
        for (si, s) in self.spec.steps.iter().enumerate() {
            for (pi, p) in s.params.iter().enumerate() {
                let mut unasked: Vec<TypeId> = Vec::new();
                let mut requests: Vec<&str> = Vec::new();
                for &t in &p.types {
                    if let Some((_, request)) =
                        ANSWERS.iter().find(|(response, _)| self.is_a(t, response))
                        && !self.asks(request)
                    {
                        unasked.push(t);
                        if !requests.contains(request) {
                            requests.push(request);
                        }
                    }
                }
                if unasked.is_empty() {
                    continue;
                }
                out.push(
                    &RESPONSE_WITHOUT_REQUEST,
                    self,
                    Some(si),
                    Some(pi),
                    format!(
                        "`{}` takes {}, the answer to {}, but no step returns one: nobody is asked, so the answer comes only if something outside sends it unasked",
                        s.name,
                        self.names(&unasked),
                        requests
                            .iter()
                            .map(|r| format!("a `{r}`"))
                            .collect::<Vec<_>>()
                            .join(" or ")
                    ),
                    "seed 002, DESIGN §8: an in-the-loop response arrives from outside because a step asked — a request to a human, an agent (a child run) or a bot; without the request no answer is due and the step waits on nothing",
                    format!(
                        "return the request from the step that needs the answer (a subtype of {}; to delegate: `AgentInTheLoopRequestEvent::new(\"Agent\", &start)`), or remove the parameter",
                        requests
                            .iter()
                            .map(|r| format!("`{r}`"))
                            .collect::<Vec<_>>()
                            .join(" or ")
                    ),
                );
            }
        }
    }

    /// SAAP019: a step that must have a person's answer, and can have nothing else in its
    /// place: if nobody answers, the run waits forever.
    pub(super) fn waits_without_deadline(&self, out: &mut Out) {
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
}
