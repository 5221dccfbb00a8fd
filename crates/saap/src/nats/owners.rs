//! Who owns a run of an agent class on NATS and where to address its events: the owner
//! record a worker keeps in `saap_{Class}_steps` ([`run_owner`]), and the address to publish
//! to a run at ([`run_address`]). Read-only: must not create or change a record.

use super::backend::ctx_key;
use super::inner::Owner;
use saap_nats::SaapNats;
use saap_protocol::RunAddress;

/// The agent id a run's address gets when its owner has not published one.
const NO_AGENT_ID: &str = "saap";

/// The key of run `run_id`'s owner record.
pub(super) fn owner_key(run_id: &str) -> String {
    ctx_key("run", run_id)
}

/// Who owns a run and where its events are addressed, as its owner record says.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RunOwner {
    /// The owning worker's id.
    pub worker: String,
    pub agent_id: String,
    pub thread_id: String,
    pub display_id: String,
}

/// Reads run `run_id`'s owner record in `saap_{class}_steps` (read-only: the bucket is not
/// created). `None`: nobody owns the run (it ended and was released, it never began, or no
/// worker of the class ever ran).
pub async fn run_owner(
    nats: &SaapNats,
    class: &str,
    run_id: &str,
) -> Result<Option<RunOwner>, crate::backend::StoreError> {
    let io = |e: &dyn std::fmt::Display| crate::backend::StoreError::Io {
        detail: format!("cannot read the owner of run `{run_id}`: {e}"),
    };
    let Ok(store) = nats
        .jetstream()
        .get_key_value(format!("saap_{class}_steps"))
        .await
    else {
        return Ok(None);
    };
    let Some(value) = store.get(owner_key(run_id)).await.map_err(|e| io(&e))? else {
        return Ok(None);
    };
    let owner: Owner = serde_json::from_slice(&value).map_err(|e| io(&e))?;
    Ok(Some(RunOwner {
        worker: owner.w,
        agent_id: owner.a.0,
        thread_id: owner.a.1,
        display_id: owner.a.2,
    }))
}

/// Where to publish to run `run_id` of agent class `class`: the address its owner
/// published, else one with thread `thread` (the run's owner routes by run id alone).
pub(crate) async fn run_address(
    nats: &SaapNats,
    class: &str,
    run_id: &str,
    thread: &str,
) -> Result<RunAddress, String> {
    let owner = run_owner(nats, class, run_id)
        .await
        .map_err(|e| e.to_string())?;
    let (agent, thread, display) = match owner {
        Some(o) => (o.agent_id, o.thread_id, o.display_id),
        None => (
            NO_AGENT_ID.to_string(),
            thread.to_string(),
            run_id.to_string(),
        ),
    };
    RunAddress::new(class, &agent, &thread, &display, run_id).map_err(|e| e.to_string())
}
