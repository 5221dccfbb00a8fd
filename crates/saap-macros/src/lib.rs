//! Derive macros for saap.
//!
//! `#[derive(Event)]` implements `saap::Event` for a struct or enum:
//!
//! ```ignore
//! #[derive(saap::Event, serde::Serialize, serde::Deserialize)]
//! #[event(parent = StopEvent)]            // default: ControlEvent
//! struct Answered { text: String }
//!
//! #[derive(saap::Event, serde::Serialize, serde::Deserialize)]
//! #[event(name = "ChunkShown", parents = [DisplayEvent])]
//! struct Shown { text: String }
//! ```
//!
//! Attributes: `name = "..."` (the wire name; default: the type's name), `parent = X` or
//! `parents = [X, Y]` (direct parents by name). Anything else is a compile error that says
//! what to write instead.

use proc_macro::TokenStream;
use quote::quote;
use syn::parse::Parser;
use syn::punctuated::Punctuated;
use syn::{DeriveInput, Expr, Lit, Meta, Token, parse_macro_input};

#[proc_macro_derive(Event, attributes(event))]
pub fn derive_event(input: TokenStream) -> TokenStream {
    let input = parse_macro_input!(input as DeriveInput);
    match expand(&input) {
        Ok(ts) => ts.into(),
        Err(e) => e.to_compile_error().into(),
    }
}

fn name_of(expr: &Expr) -> syn::Result<String> {
    match expr {
        Expr::Path(p) => p
            .path
            .segments
            .last()
            .map(|s| s.ident.to_string())
            .ok_or_else(|| syn::Error::new_spanned(expr, "expected an event type name")),
        Expr::Lit(l) => match &l.lit {
            Lit::Str(s) => Ok(s.value()),
            _ => Err(syn::Error::new_spanned(
                expr,
                "expected an event type name or a string",
            )),
        },
        _ => Err(syn::Error::new_spanned(
            expr,
            "expected an event type name, e.g. `parent = StopEvent`",
        )),
    }
}

fn expand(input: &DeriveInput) -> syn::Result<proc_macro2::TokenStream> {
    if !input.generics.params.is_empty() {
        return Err(syn::Error::new_spanned(
            &input.generics,
            "an event type cannot be generic: its wire name must be one fixed string; declare one type per event name",
        ));
    }
    let ident = &input.ident;
    let mut name = ident.to_string();
    let mut parents: Vec<String> = Vec::new();
    for attr in input.attrs.iter().filter(|a| a.path().is_ident("event")) {
        let list = attr.meta.require_list()?;
        let metas = Punctuated::<Meta, Token![,]>::parse_terminated.parse2(list.tokens.clone())?;
        for meta in metas {
            let Meta::NameValue(nv) = &meta else {
                return Err(syn::Error::new_spanned(
                    &meta,
                    "write `name = \"...\"`, `parent = Type` or `parents = [A, B]`",
                ));
            };
            if nv.path.is_ident("name") {
                name = name_of(&nv.value)?;
            } else if nv.path.is_ident("parent") {
                parents.push(name_of(&nv.value)?);
            } else if nv.path.is_ident("parents") {
                let Expr::Array(arr) = &nv.value else {
                    return Err(syn::Error::new_spanned(
                        &nv.value,
                        "write `parents = [A, B]`",
                    ));
                };
                for e in &arr.elems {
                    parents.push(name_of(e)?);
                }
            } else {
                return Err(syn::Error::new_spanned(
                    &nv.path,
                    "unknown `event` attribute; write `name = \"...\"`, `parent = Type` or `parents = [A, B]`",
                ));
            }
        }
    }
    if parents.is_empty() {
        parents.push("ControlEvent".to_string());
    }
    Ok(quote! {
        impl ::saap::Event for #ident {
            const NAME: &'static str = #name;
            const PARENTS: &'static [&'static str] = &[#(#parents),*];
        }
    })
}
