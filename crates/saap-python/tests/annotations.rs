//! The annotation table of the Python SDK (reference notes §3.1), one step per form: each
//! annotation must become the parameter kind and types the Python dispatcher gives it, and
//! return annotations the outputs.
#![allow(clippy::unwrap_used)]

use saap_dispatch::spec::{OutputMax, StepSpec};
use saap_python::check_path;

const SOURCE: &str = r#"
import typing
from typing import Annotated, List, Optional, Union

from swiss_ai_hub.agent.agents.agent import Agent
from swiss_ai_hub.agent.context.run.run_context import RunContext
from swiss_ai_hub.agent.workflow.decorators.step import step
from swiss_ai_hub.core.events import ControlEvent, StopEvent, UserMessageEvent
from swiss_ai_hub.core.workflow.annotations.custom_types.list_of_size import FixedList

N = 2


class A(ControlEvent):
    pass


class B(ControlEvent):
    pass


class Table(Agent):
    @step()
    async def required(self, a: A, ctx: RunContext) -> StopEvent: ...

    @step()
    async def pipe_none(self, a: A | None) -> StopEvent: ...

    @step()
    async def optional(self, a: Optional[A]) -> StopEvent: ...

    @step()
    async def typing_optional(self, a: typing.Optional[A]) -> StopEvent: ...

    @step()
    async def union_none(self, a: Union[A, None]) -> StopEvent: ...

    @step()
    async def union(self, a: A | B) -> StopEvent: ...

    @step()
    async def listed(self, a: list[A]) -> StopEvent: ...

    @step()
    async def listed_union(self, a: List[A | B]) -> StopEvent: ...

    @step()
    async def list_or_none(self, a: list[A] | None) -> StopEvent: ...

    @step()
    async def fixed(self, a: FixedList(A, 3)) -> StopEvent: ...

    @step()
    async def fixed_const(self, a: FixedList(A | B, N)) -> StopEvent: ...

    @step()
    async def fixed_or_none(self, a: FixedList(A, 3) | None) -> StopEvent: ...

    @step()
    async def annotated(self, a: Annotated[A, "doc"]) -> StopEvent: ...

    @step()
    async def string(self, a: "A | None") -> StopEvent: ...

    @step()
    async def start(self, m: UserMessageEvent) -> A | B: ...

    @step()
    async def many(self, m: UserMessageEvent) -> list[A]: ...

    @step()
    async def nothing(self, m: UserMessageEvent) -> None: ...

    @step()
    async def maybe(self, m: UserMessageEvent) -> Optional[B]: ...
"#;

fn steps() -> Vec<StepSpec> {
    let dir = tempfile::tempdir().unwrap();
    let p = dir.path().join("table.py");
    std::fs::write(&p, SOURCE).unwrap();
    let r = check_path(&p).unwrap();
    r.agents[0].spec.steps.clone()
}

fn param(steps: &[StepSpec], step: &str) -> (String, Vec<String>, Option<u32>) {
    let s = steps.iter().find(|s| s.name == step).unwrap();
    assert_eq!(s.params.len(), 1, "{step}: {:?}", s.params);
    let p = &s.params[0];
    (p.kind.as_str().to_string(), p.types.clone(), p.size)
}

#[test]
fn parameter_kinds() {
    let steps = steps();
    let one = |k: &str, t: &[&str], n: Option<u32>| {
        (
            k.to_string(),
            t.iter().map(|s| s.to_string()).collect::<Vec<_>>(),
            n,
        )
    };
    assert_eq!(param(&steps, "required"), one("required", &["A"], None));
    for s in [
        "pipe_none",
        "optional",
        "typing_optional",
        "union_none",
        "string",
    ] {
        assert_eq!(param(&steps, s), one("optional", &["A"], None), "{s}");
    }
    assert_eq!(param(&steps, "union"), one("required", &["A", "B"], None));
    assert_eq!(param(&steps, "listed"), one("list", &["A"], None));
    assert_eq!(
        param(&steps, "listed_union"),
        one("list", &["A", "B"], None)
    );
    assert_eq!(param(&steps, "list_or_none"), one("list", &["A"], None));
    assert_eq!(param(&steps, "fixed"), one("fixed_list", &["A"], Some(3)));
    assert_eq!(
        param(&steps, "fixed_const"),
        one("fixed_list", &["A", "B"], Some(2))
    );
    // The SDK loses the size inside a union: it binds like an optional single.
    assert_eq!(
        param(&steps, "fixed_or_none"),
        one("optional", &["A"], None)
    );
    assert_eq!(param(&steps, "annotated"), one("required", &["A"], None));
}

#[test]
fn outputs() {
    let steps = steps();
    let get = |n: &str| steps.iter().find(|s| s.name == n).unwrap();
    assert_eq!(get("start").outputs, ["A", "B"]);
    assert!(get("start").output_max.is_empty());
    assert_eq!(get("many").outputs, ["A"]);
    assert_eq!(get("many").output_max.get("A"), Some(&OutputMax::Unbounded));
    assert!(get("nothing").outputs.is_empty());
    assert_eq!(get("maybe").outputs, ["B"]);
    assert_eq!(get("required").outputs, ["StopEvent"]);
}
