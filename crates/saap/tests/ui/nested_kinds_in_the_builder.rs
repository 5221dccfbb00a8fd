#![allow(unused)] // only the trait error matters here
use saap::{Step, StepCtx, StepError, UserMessageEvent};

// The builder API has no macro to catch a nested kind; the trait error says what to write.
fn main() {
    let _ = Step::new("answer", |qs: Vec<Option<UserMessageEvent>>, _: StepCtx| async move {
        let _ = qs;
        Ok::<_, StepError>(())
    });
}
