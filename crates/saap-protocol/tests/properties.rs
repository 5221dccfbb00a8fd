//! Property tests: the codec round-trips, never panics, and the hierarchy and subjects keep
//! their invariants on generated inputs. Case count: `PROPTEST_CASES` (default 256).
#![allow(clippy::unwrap_used)]

use std::collections::BTreeSet;

use proptest::prelude::*;
use proptest::sample::{Index, select};
use saap_protocol::event::{KEY_DISPLAY_DESCRIPTION, KEY_DISPLAY_NAME, NestedEvent};
use saap_protocol::subject::{AgentEventFilter, ConfigRpcSubject, DiscoverySubject};
use saap_protocol::{
    AgentEventSubject, DecodeLimits, EventEnvelope, EventId, EventKind, Hierarchy, LocaleString,
    RunAddress,
};
use serde_json::{Map, Value};

fn hierarchy() -> Hierarchy {
    Hierarchy::builtin()
}

fn builtin_names() -> Vec<String> {
    hierarchy().names().map(str::to_owned).collect()
}

fn arb_leaf() -> impl Strategy<Value = Value> {
    prop_oneof![
        Just(Value::Null),
        any::<bool>().prop_map(Value::Bool),
        any::<i64>().prop_map(Value::from),
        any::<u64>().prop_map(Value::from),
        any::<f64>()
            .prop_filter("finite", |f| f.is_finite())
            .prop_map(Value::from),
        ".{0,12}".prop_map(Value::String),
    ]
}

fn arb_json() -> impl Strategy<Value = Value> {
    arb_leaf().prop_recursive(3, 24, 4, |inner| {
        prop_oneof![
            prop::collection::vec(inner.clone(), 0..4).prop_map(Value::Array),
            prop::collection::btree_map("[a-z_]{1,6}", inner, 0..4)
                .prop_map(|m| Value::Object(m.into_iter().collect())),
        ]
    })
}

/// Field keys that are neither envelope keys nor look like event markers.
fn arb_field_key() -> impl Strategy<Value = String> {
    "[a-z][a-z0-9_]{0,7}".prop_filter("not an envelope key", |k| {
        !matches!(
            k.as_str(),
            "event_id" | "created_at" | "display_name" | "display_description"
        )
    })
}

fn arb_locale() -> impl Strategy<Value = Option<LocaleString>> {
    proptest::option::of(
        (
            proptest::option::of(".{0,6}"),
            proptest::option::of(".{0,6}"),
            proptest::option::of(".{0,6}"),
            proptest::option::of(".{0,6}"),
        )
            .prop_map(|(de, en, fr, it)| LocaleString { de, en, fr, it }),
    )
}

fn arb_event_id() -> impl Strategy<Value = EventId> {
    any::<[u8; 12]>().prop_map(EventId::from_bytes)
}

/// An envelope as the decoder would produce it (normalised), without nested events.
fn arb_flat_envelope() -> impl Strategy<Value = EventEnvelope> {
    let names = builtin_names();
    let known = (
        select(names.clone()),
        arb_event_id(),
        any::<i64>(),
        arb_locale(),
        arb_locale(),
        prop::collection::vec((arb_field_key(), arb_json()), 0..5),
    )
        .prop_map(|(name, id, ts, dn, dd, fields)| {
            let h = hierarchy();
            let mut e = EventEnvelope::new(&h, &name, id, ts).unwrap();
            if e.classification().display {
                e.display_name = dn;
                e.display_description = dd;
            }
            for (k, v) in fields {
                e = e.with_field(&k, v);
            }
            e
        });
    let foreign = (
        "[A-Z][A-Za-z]{0,10}Foreign",
        prop::collection::vec(
            prop_oneof![select(names), "[A-Z][a-z]{0,6}Mixin".prop_map(String::from)],
            0..6,
        ),
        arb_event_id(),
        any::<i64>(),
        arb_locale(),
        prop::collection::vec((arb_field_key(), arb_json()), 0..5),
    )
        .prop_map(|(name, parents, id, ts, dn, fields)| {
            let h = hierarchy();
            let mut list = vec![name.clone()];
            list.extend(parents);
            let known_type = h.resolve_known_type(&name, &list).map(str::to_owned);
            let display = list.iter().any(|n| n == "DisplayEvent");
            let mut e = EventEnvelope {
                event_id: id,
                created_at: ts,
                event_name: name,
                parent_event_names: list,
                display_name: if display { dn } else { None },
                display_description: None,
                fields: Map::new(),
                nested: Default::default(),
                known_type,
            };
            for (k, v) in fields {
                e = e.with_field(&k, v);
            }
            e
        });
    prop_oneof![known, foreign]
}

fn arb_envelope() -> impl Strategy<Value = EventEnvelope> {
    (
        arb_flat_envelope(),
        proptest::option::of((arb_field_key(), arb_flat_envelope())),
        proptest::option::of((
            arb_field_key(),
            prop::collection::vec(arb_flat_envelope(), 1..3),
        )),
    )
        .prop_map(|(mut e, one, list)| {
            if let Some((k, inner)) = one {
                e = e.with_nested(&k, NestedEvent::One(Box::new(inner)));
            }
            if let Some((k, inner)) = list {
                e = e.with_nested(&k, NestedEvent::List(inner));
            }
            e
        })
}

fn decode(bytes: &[u8]) -> Result<EventEnvelope, saap_protocol::DecodeError> {
    EventEnvelope::decode(bytes, &hierarchy(), &DecodeLimits::default())
}

/// What the fuzz target also checks: anything that decodes round-trips.
fn assert_round_trip_if_decodes(bytes: &[u8]) -> Result<(), TestCaseError> {
    if let Ok(e) = decode(bytes) {
        let encoded = e.encode_bytes();
        let again = decode(&encoded).map_err(|err| {
            TestCaseError::fail(format!(
                "re-decoding failed: {err}\n{}",
                String::from_utf8_lossy(&encoded)
            ))
        })?;
        prop_assert_eq!(&again, &e);
        prop_assert_eq!(again.encode_bytes(), encoded);
    }
    Ok(())
}

proptest! {
    #[test]
    fn encode_then_decode_is_the_identity(e in arb_envelope()) {
        let back = decode(&e.encode_bytes()).unwrap();
        prop_assert_eq!(&back, &e);
        prop_assert_eq!(back.encode(), e.encode());
    }

    #[test]
    fn mutated_events_round_trip_whenever_they_decode(
        e in arb_envelope(),
        edits in prop::collection::vec((any::<Index>(), proptest::option::of(arb_json())), 0..4),
    ) {
        let mut obj = match e.to_json() { Value::Object(o) => o, _ => unreachable!() };
        let mut keys: Vec<String> = obj.keys().cloned().collect();
        keys.extend(["_event_name", "_parent_event_names", KEY_DISPLAY_NAME, KEY_DISPLAY_DESCRIPTION]
            .map(String::from));
        for (idx, v) in edits {
            let k = idx.get(&keys).clone();
            match v {
                Some(v) => { obj.insert(k, v); }
                None => { obj.shift_remove(&k); }
            }
        }
        assert_round_trip_if_decodes(Value::Object(obj).to_string().as_bytes())?;
    }

    #[test]
    fn decoding_arbitrary_bytes_never_panics(bytes in prop::collection::vec(any::<u8>(), 0..512)) {
        assert_round_trip_if_decodes(&bytes)?;
    }

    #[test]
    fn decoding_arbitrary_json_never_panics(v in arb_json()) {
        assert_round_trip_if_decodes(v.to_string().as_bytes())?;
    }

    #[test]
    fn subject_parsers_never_panic(s in "[a-z_*>. ]{0,60}") {
        let _ = AgentEventSubject::parse(&s);
        let _ = ConfigRpcSubject::parse(&s);
        let _ = DiscoverySubject::parse(&s);
    }

    #[test]
    fn agent_event_subject_parse_inverts_build_and_filters_match(
        t in prop::collection::vec("[A-Za-z0-9_-]{1,12}", 8),
        control in any::<bool>(),
    ) {
        let kind = if control { EventKind::Control } else { EventKind::Display };
        let run = RunAddress::new(&t[0], &t[1], &t[2], &t[3], &t[4]).unwrap();
        let s = run.event_subject(kind, &t[5], &t[6]).unwrap();
        let text = s.to_string();
        prop_assert_eq!(text.split('.').count(), 9);
        prop_assert_eq!(AgentEventSubject::parse(&text).unwrap(), s.clone());
        for f in [
            AgentEventFilter::all(),
            AgentEventFilter::all().class(&t[0]),
            AgentEventFilter::all().class(&t[0]).instance(&t[1]).thread(&t[2]),
            run.filter(Some(kind)),
        ] {
            prop_assert!(f.matches(&s));
            // The filter subject matches the subject token by token (NATS `*` semantics).
            let fs = f.to_subject().unwrap();
            for (ft, st) in fs.split('.').zip(text.split('.')) {
                prop_assert!(ft == "*" || ft == st, "{} vs {}", fs, text);
            }
        }
        let other_class = format!("{}x", t[0]);
        prop_assert!(!AgentEventFilter::all().class(&other_class).matches(&s));
    }

    #[test]
    fn hierarchy_lineage_lists_each_ancestor_once_deepest_first(
        parents in prop::collection::vec(prop::collection::vec(any::<Index>(), 0..4), 1..40),
    ) {
        let mut h = Hierarchy::new();
        let mut names: Vec<String> = Vec::new();
        for (i, ps) in parents.iter().enumerate() {
            let name = format!("T{i}");
            let chosen: BTreeSet<&str> = if names.is_empty() {
                BTreeSet::new()
            } else {
                ps.iter().map(|ix| ix.get(&names).as_str()).collect()
            };
            let chosen: Vec<&str> = chosen.into_iter().collect();
            h.register(&name, &chosen).unwrap();
            names.push(name);
        }
        for name in &names {
            let lineage = h.parent_event_names(name).unwrap();
            prop_assert_eq!(&lineage[0], name);
            let unique: BTreeSet<&String> = lineage.iter().collect();
            prop_assert_eq!(unique.len(), lineage.len());
            let depths: Vec<usize> = lineage.iter().map(|n| h.depth(n).unwrap()).collect();
            prop_assert!(depths.windows(2).all(|w| w[0] >= w[1]), "{:?}", depths);
            for other in &names {
                prop_assert_eq!(h.is_subtype_of(name, other), lineage.contains(other));
            }
            for p in h.direct_parents(name).unwrap() {
                prop_assert!(h.depth(p).unwrap() < h.depth(name).unwrap());
            }
        }
    }
}
