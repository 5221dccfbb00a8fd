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
//!
//! `#[step]` on an `async fn` whose parameters are event parameters (`Required<T>`,
//! `Option<T>`, `Vec<T>`, `FixedList<T, N>`) followed by an optional `StepCtx` generates
//! `fn <name>_step() -> saap::Step<..>` with the parameter names taken from the signature:
//!
//! ```ignore
//! #[step(max_executions_per_run = 1, precondition = hints_arrived, stop_on_error = false)]
//! async fn answer(r: Required<Retrieved>, hints: Option<Hints>, ctx: StepCtx)
//!     -> Result<Answered, StepError> { … }
//! fn hints_arrived((_, hints): &(Required<Retrieved>, Option<Hints>)) -> bool { hints.is_some() }
//! Workflow::builder("Rag").step(answer_step())
//! ```

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
            // A clone when the type implements `Clone` (autoref picks `ViaClone` first).
            fn try_clone_event(&self) -> ::core::option::Option<Self> {
                #[allow(unused_imports)]
                use ::saap::event::__clone::{NoClone as _, ViaClone as _};
                (&&::saap::event::__clone::Probe(self)).probe_clone()
            }
        }
    })
}

/// Turns an `async fn` into a step constructor `fn <name>_step() -> saap::Step<..>`.
#[proc_macro_attribute]
pub fn step(attr: TokenStream, item: TokenStream) -> TokenStream {
    let func = parse_macro_input!(item as syn::ItemFn);
    match expand_step(attr.into(), &func) {
        Ok(ts) => ts.into(),
        Err(e) => e.to_compile_error().into(),
    }
}

fn is_step_ctx(ty: &syn::Type) -> bool {
    match ty {
        syn::Type::Path(p) => p.path.segments.last().is_some_and(|s| s.ident == "StepCtx"),
        _ => false,
    }
}

fn expand_step(
    attr: proc_macro2::TokenStream,
    func: &syn::ItemFn,
) -> syn::Result<proc_macro2::TokenStream> {
    let sig = &func.sig;
    if sig.asyncness.is_none() {
        return Err(syn::Error::new_spanned(
            sig.fn_token,
            "a step must be an `async fn`; write `async fn`",
        ));
    }
    if !sig.generics.params.is_empty() {
        return Err(syn::Error::new_spanned(
            &sig.generics,
            "a step cannot be generic: the spec needs concrete event types",
        ));
    }
    let mut names = Vec::new();
    let mut types = Vec::new();
    let mut has_ctx = false;
    for (i, arg) in sig.inputs.iter().enumerate() {
        let syn::FnArg::Typed(pt) = arg else {
            return Err(syn::Error::new_spanned(
                arg,
                "a step takes no `self`: steps are stateless; write a free `async fn` and keep state in RunContext",
            ));
        };
        if is_step_ctx(&pt.ty) {
            if i + 1 != sig.inputs.len() {
                return Err(syn::Error::new_spanned(
                    &pt.ty,
                    "`StepCtx` must be the last parameter",
                ));
            }
            has_ctx = true;
            continue;
        }
        let syn::Pat::Ident(id) = &*pt.pat else {
            return Err(syn::Error::new_spanned(
                &pt.pat,
                "write a plain parameter name (the spec uses it), e.g. `hints: Option<Hints>`",
            ));
        };
        names.push(id.ident.to_string());
        types.push((*pt.ty).clone());
    }
    if types.is_empty() {
        return Err(syn::Error::new_spanned(
            &sig.inputs,
            "a step needs at least one event parameter (Required<T>, Option<T>, Vec<T> or FixedList<T, N>)",
        ));
    }
    if types.len() > 6 {
        return Err(syn::Error::new_spanned(
            &sig.inputs,
            "a step takes at most 6 event parameters; group inputs into fewer event types",
        ));
    }
    let mut options = Vec::new();
    let metas = Punctuated::<Meta, Token![,]>::parse_terminated.parse2(attr)?;
    for meta in metas {
        let Meta::NameValue(nv) = &meta else {
            return Err(syn::Error::new_spanned(
                &meta,
                "write `precondition = path`, `max_executions_per_run = N`, `stop_on_error = bool` or `name = \"...\"`",
            ));
        };
        let v = &nv.value;
        if nv.path.is_ident("precondition") {
            let pname = name_of(v)?;
            options.push(quote! { .precondition(#pname, #v) });
        } else if nv.path.is_ident("max_executions_per_run") {
            options.push(quote! { .max_executions_per_run(#v) });
        } else if nv.path.is_ident("stop_on_error") {
            options.push(quote! { .stop_on_error(#v) });
        } else if nv.path.is_ident("name") {
            options.push(quote! {});
        } else {
            return Err(syn::Error::new_spanned(
                &nv.path,
                "unknown step option; write `precondition = path`, `max_executions_per_run = N` or `stop_on_error = bool`",
            ));
        }
    }
    let fname = &sig.ident;
    let vis = &func.vis;
    let ctor = quote::format_ident!("{}_step", fname);
    let step_name = fname.to_string();
    let pats: Vec<proc_macro2::Ident> = (0..types.len())
        .map(|i| quote::format_ident!("__p{}", i))
        .collect();
    let ctx_arg = if has_ctx {
        quote! { __ctx }
    } else {
        quote! {}
    };
    let (input_ty, input_pat) = if types.len() == 1 {
        let t = &types[0];
        let p = &pats[0];
        (quote! { #t }, quote! { #p })
    } else {
        (quote! { (#(#types,)*) }, quote! { (#(#pats,)*) })
    };
    Ok(quote! {
        #func

        #[doc = concat!("The step `", #step_name, "` (generated by `#[step]`).")]
        #vis fn #ctor() -> ::saap::Step<#input_ty> {
            ::saap::Step::new(#step_name, |#input_pat: #input_ty, __ctx: ::saap::StepCtx| {
                let _ = &__ctx;
                #fname(#(#pats,)* #ctx_arg)
            })
            .param_names(&[#(#names),*])
            #(#options)*
        }
    })
}
