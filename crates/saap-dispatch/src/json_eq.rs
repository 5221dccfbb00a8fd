//! Whether a value serializes to a given JSON value, decided while it serializes: no JSON
//! value is built and nothing is read back. What comparing a replayed decision record with the
//! stored one needs: reading the stored one back as a [`crate::Record`] goes through serde's
//! buffering of internally tagged enums, which cost most of a replay (issue 23's replay
//! speed), and serializing the replayed one into a value allocates for every field.
//!
//! Strict as `serde_json::to_value(v) == json` is, with one difference: a float is never
//! equal to an integer of the same value. Must not allocate on the equal path (map keys that
//! are not strings aside, which records do not have).

use serde::ser::{self, Serialize};
use serde_json::{Map, Value};
use std::fmt;

/// Whether `value` serializes to `json` (as `serde_json::to_value(value)` would give it).
pub fn serializes_to<T: Serialize + ?Sized>(value: &T, json: &Value) -> bool {
    value.serialize(Eq(json)).is_ok()
}

/// The values differ (or `value` does not serialize): the comparison stops there.
#[derive(Debug)]
struct Differ;

impl fmt::Display for Differ {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("the value does not serialize to the JSON it is compared with")
    }
}

impl std::error::Error for Differ {}

impl ser::Error for Differ {
    fn custom<M: fmt::Display>(_: M) -> Self {
        Differ
    }
}

fn check(equal: bool) -> Result<(), Differ> {
    if equal { Ok(()) } else { Err(Differ) }
}

/// Compares what is serialized into it with one JSON value.
#[derive(Clone, Copy)]
struct Eq<'a>(&'a Value);

impl<'a> Eq<'a> {
    fn int(self, v: i64) -> Result<(), Differ> {
        check(matches!(self.0, Value::Number(n) if !n.is_f64() && n.as_i64() == Some(v)))
    }
    fn uint(self, v: u64) -> Result<(), Differ> {
        check(matches!(self.0, Value::Number(n) if !n.is_f64() && n.as_u64() == Some(v)))
    }
    fn float(self, v: f64) -> Result<(), Differ> {
        if !v.is_finite() {
            // serde_json writes NaN and the infinities as null.
            return check(self.0.is_null());
        }
        check(matches!(self.0, Value::Number(n) if n.is_f64() && n.as_f64() == Some(v)))
    }
    fn object(self) -> Result<&'a Map<String, Value>, Differ> {
        self.0.as_object().ok_or(Differ)
    }
    fn array(self) -> Result<Items<'a>, Differ> {
        let items = self.0.as_array().ok_or(Differ)?;
        Ok(Items(items.iter()))
    }
    /// The value under `variant`, the only key of an object (an externally tagged variant).
    fn variant(self, variant: &str) -> Result<Eq<'a>, Differ> {
        let o = self.object()?;
        match (o.len(), o.get(variant)) {
            (1, Some(inner)) => Ok(Eq(inner)),
            _ => Err(Differ),
        }
    }
}

impl<'a> ser::Serializer for Eq<'a> {
    type Ok = ();
    type Error = Differ;
    type SerializeSeq = Items<'a>;
    type SerializeTuple = Items<'a>;
    type SerializeTupleStruct = Items<'a>;
    type SerializeTupleVariant = Items<'a>;
    type SerializeMap = Fields<'a>;
    type SerializeStruct = Fields<'a>;
    type SerializeStructVariant = Fields<'a>;

    fn serialize_bool(self, v: bool) -> Result<(), Differ> {
        check(self.0.as_bool() == Some(v))
    }
    fn serialize_i8(self, v: i8) -> Result<(), Differ> {
        self.int(v.into())
    }
    fn serialize_i16(self, v: i16) -> Result<(), Differ> {
        self.int(v.into())
    }
    fn serialize_i32(self, v: i32) -> Result<(), Differ> {
        self.int(v.into())
    }
    fn serialize_i64(self, v: i64) -> Result<(), Differ> {
        self.int(v)
    }
    fn serialize_u8(self, v: u8) -> Result<(), Differ> {
        self.uint(v.into())
    }
    fn serialize_u16(self, v: u16) -> Result<(), Differ> {
        self.uint(v.into())
    }
    fn serialize_u32(self, v: u32) -> Result<(), Differ> {
        self.uint(v.into())
    }
    fn serialize_u64(self, v: u64) -> Result<(), Differ> {
        self.uint(v)
    }
    fn serialize_f32(self, v: f32) -> Result<(), Differ> {
        self.float(v.into())
    }
    fn serialize_f64(self, v: f64) -> Result<(), Differ> {
        self.float(v)
    }
    fn serialize_char(self, v: char) -> Result<(), Differ> {
        let mut buf = [0u8; 4];
        self.serialize_str(v.encode_utf8(&mut buf))
    }
    fn serialize_str(self, v: &str) -> Result<(), Differ> {
        check(self.0.as_str() == Some(v))
    }
    fn serialize_bytes(self, v: &[u8]) -> Result<(), Differ> {
        // serde_json writes bytes as an array of numbers.
        let items = self.0.as_array().ok_or(Differ)?;
        check(
            items.len() == v.len()
                && items
                    .iter()
                    .zip(v)
                    .all(|(j, b)| j.as_u64() == Some(u64::from(*b))),
        )
    }
    fn serialize_none(self) -> Result<(), Differ> {
        check(self.0.is_null())
    }
    fn serialize_some<T: Serialize + ?Sized>(self, value: &T) -> Result<(), Differ> {
        value.serialize(self)
    }
    fn serialize_unit(self) -> Result<(), Differ> {
        check(self.0.is_null())
    }
    fn serialize_unit_struct(self, _: &'static str) -> Result<(), Differ> {
        self.serialize_unit()
    }
    fn serialize_unit_variant(
        self,
        _: &'static str,
        _: u32,
        variant: &'static str,
    ) -> Result<(), Differ> {
        self.serialize_str(variant)
    }
    fn serialize_newtype_struct<T: Serialize + ?Sized>(
        self,
        _: &'static str,
        value: &T,
    ) -> Result<(), Differ> {
        value.serialize(self)
    }
    fn serialize_newtype_variant<T: Serialize + ?Sized>(
        self,
        _: &'static str,
        _: u32,
        variant: &'static str,
        value: &T,
    ) -> Result<(), Differ> {
        value.serialize(self.variant(variant)?)
    }
    fn serialize_seq(self, _: Option<usize>) -> Result<Items<'a>, Differ> {
        self.array()
    }
    fn serialize_tuple(self, _: usize) -> Result<Items<'a>, Differ> {
        self.array()
    }
    fn serialize_tuple_struct(self, _: &'static str, _: usize) -> Result<Items<'a>, Differ> {
        self.array()
    }
    fn serialize_tuple_variant(
        self,
        _: &'static str,
        _: u32,
        variant: &'static str,
        _: usize,
    ) -> Result<Items<'a>, Differ> {
        self.variant(variant)?.array()
    }
    fn serialize_map(self, _: Option<usize>) -> Result<Fields<'a>, Differ> {
        Ok(Fields::of(self.object()?))
    }
    fn serialize_struct(self, _: &'static str, _: usize) -> Result<Fields<'a>, Differ> {
        Ok(Fields::of(self.object()?))
    }
    fn serialize_struct_variant(
        self,
        _: &'static str,
        _: u32,
        variant: &'static str,
        _: usize,
    ) -> Result<Fields<'a>, Differ> {
        Ok(Fields::of(self.variant(variant)?.object()?))
    }
}

/// The items of a JSON array, compared one by one; all of them must be used.
struct Items<'a>(std::slice::Iter<'a, Value>);

impl Items<'_> {
    fn item<T: Serialize + ?Sized>(&mut self, value: &T) -> Result<(), Differ> {
        value.serialize(Eq(self.0.next().ok_or(Differ)?))
    }
    fn end(mut self) -> Result<(), Differ> {
        check(self.0.next().is_none())
    }
}

/// The item-by-item traits of [`Items`], all alike.
macro_rules! items {
    ($($trait:ident :: $method:ident),*) => {$(
        impl ser::$trait for Items<'_> {
            type Ok = ();
            type Error = Differ;
            fn $method<T: Serialize + ?Sized>(&mut self, value: &T) -> Result<(), Differ> {
                self.item(value)
            }
            fn end(self) -> Result<(), Differ> {
                Items::end(self)
            }
        }
    )*};
}
items!(
    SerializeSeq::serialize_element,
    SerializeTuple::serialize_element,
    SerializeTupleStruct::serialize_field,
    SerializeTupleVariant::serialize_field
);

/// The fields of a JSON object, each looked up by its key; every key must be serialized
/// (none twice: a struct has each field once, and a map's keys are counted as found).
struct Fields<'a> {
    object: &'a Map<String, Value>,
    /// The object's entries in its order: JSON read back from what the same type wrote
    /// keeps the fields in the order they are serialized (serde_json's `preserve_order`), so
    /// the next entry is tried before a lookup by key (which hashes the key: most of the
    /// comparison's cost otherwise).
    next: serde_json::map::Iter<'a>,
    seen: usize,
    /// A map's key, between `serialize_key` and `serialize_value`.
    key: Option<String>,
}

impl<'a> Fields<'a> {
    fn of(object: &'a Map<String, Value>) -> Fields<'a> {
        Fields {
            object,
            next: object.iter(),
            seen: 0,
            key: None,
        }
    }
    fn field<T: Serialize + ?Sized>(&mut self, key: &str, value: &T) -> Result<(), Differ> {
        self.seen += 1;
        let json = match self.next.next() {
            Some((k, v)) if k == key => v,
            _ => self.object.get(key).ok_or(Differ)?,
        };
        value.serialize(Eq(json))
    }
    fn end(self) -> Result<(), Differ> {
        check(self.seen == self.object.len())
    }
}

/// The field-by-field traits of [`Fields`], alike.
macro_rules! fields {
    ($($trait:ident),*) => {$(
        impl ser::$trait for Fields<'_> {
            type Ok = ();
            type Error = Differ;
            fn serialize_field<T: Serialize + ?Sized>(
                &mut self,
                key: &'static str,
                value: &T,
            ) -> Result<(), Differ> {
                self.field(key, value)
            }
            fn end(self) -> Result<(), Differ> {
                Fields::end(self)
            }
        }
    )*};
}
fields!(SerializeStruct, SerializeStructVariant);

impl ser::SerializeMap for Fields<'_> {
    type Ok = ();
    type Error = Differ;
    fn serialize_key<T: Serialize + ?Sized>(&mut self, key: &T) -> Result<(), Differ> {
        // JSON keys are strings: a key is read as serde_json writes it.
        match serde_json::to_value(key).map_err(|_| Differ)? {
            Value::String(s) => self.key = Some(s),
            Value::Number(n) => self.key = Some(n.to_string()),
            Value::Bool(b) => self.key = Some(b.to_string()),
            _ => return Err(Differ),
        }
        Ok(())
    }
    fn serialize_value<T: Serialize + ?Sized>(&mut self, value: &T) -> Result<(), Differ> {
        let key = self.key.take().ok_or(Differ)?;
        self.field(&key, value)
    }
    fn end(self) -> Result<(), Differ> {
        Fields::end(self)
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;
    use serde_json::json;
    use std::collections::BTreeMap;

    #[derive(serde::Serialize)]
    #[serde(tag = "kind", rename_all = "snake_case")]
    enum Tagged {
        Unit,
        Fields {
            n: u32,
            name: String,
            #[serde(skip_serializing_if = "Option::is_none")]
            maybe: Option<i64>,
        },
    }

    #[derive(serde::Serialize)]
    enum External {
        Tuple(u8, bool),
        Struct { x: f64 },
        New(Vec<char>),
    }

    /// `serializes_to(v, j)` agrees with `to_value(v) == j`.
    fn agrees<T: Serialize>(v: &T, j: &Value) {
        let expected = serde_json::to_value(v).unwrap() == *j;
        assert_eq!(
            serializes_to(v, j),
            expected,
            "{v:?} vs {j}",
            v = serde_json::to_value(v)
        );
    }

    #[test]
    fn a_value_equals_its_json_and_nothing_else() {
        let values: Vec<Value> = vec![
            serde_json::to_value(Tagged::Unit).unwrap(),
            serde_json::to_value(Tagged::Fields {
                n: 3,
                name: "a".into(),
                maybe: None,
            })
            .unwrap(),
            serde_json::to_value(Tagged::Fields {
                n: 3,
                name: "a".into(),
                maybe: Some(-4),
            })
            .unwrap(),
            json!({"kind": "fields", "n": 3, "name": "a", "extra": 1}),
            json!({"kind": "fields", "n": 3.0, "name": "a"}),
            json!({"kind": "unit"}),
            json!(null),
            json!([1, true]),
        ];
        for j in &values {
            agrees(&Tagged::Unit, j);
            agrees(
                &Tagged::Fields {
                    n: 3,
                    name: "a".into(),
                    maybe: None,
                },
                j,
            );
            agrees(
                &Tagged::Fields {
                    n: 3,
                    name: "a".into(),
                    maybe: Some(-4),
                },
                j,
            );
        }
        for v in [
            External::Tuple(7, true),
            External::Struct { x: 1.5 },
            External::New(vec!['é', 'x']),
        ] {
            let own = serde_json::to_value(&v).unwrap();
            assert!(serializes_to(&v, &own), "{own}");
            agrees(&v, &json!({"Tuple": [7, false]}));
            agrees(&v, &json!({"Struct": {"x": 1}}));
            agrees(&v, &json!({"New": ["é"]}));
        }
        let mut map = BTreeMap::new();
        map.insert(2u32, "two");
        map.insert(1u32, "one");
        agrees(&map, &json!({"1": "one", "2": "two"}));
        agrees(&map, &json!({"1": "one"}));
        agrees(&map, &json!({"1": "one", "2": "two", "3": "three"}));
        agrees(&f64::NAN, &json!(null));
        agrees(&u64::MAX, &json!(u64::MAX));
        agrees(&-1i64, &json!(u64::MAX));
        agrees(&b"ab".as_slice(), &json!([97, 98]));
    }
}
