//! Derive and attribute macros for saap: `#[derive(Event)]`, `#[derive(EventUnion)]`,
//! `#[step]` and `#[agent]`.
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
//! `Option<T>`, `Vec<T>`, `FixedList<T, N>` where `T` is an event type or a union of them,
//! and a bare union `Either<A, B>` or `#[derive(EventUnion)]` enum) and injectables (`StepCtx`,
//! `RunContext`, `ThreadContext`, `Config<C>`, `StepConfig<S>`, `Res<T>`, in any order) generates
//! `fn <name>_step() -> saap::Step<..>` with the parameter names taken from the signature:
//!
//! ```ignore
//! #[step(max_executions_per_run = 1, precondition = hints_arrived, stop_on_error = false)]
//! async fn answer(r: Required<Retrieved>, hints: Option<Hints>, ctx: StepCtx)
//!     -> Result<Answered, StepError> { … }
//! fn hints_arrived((_, hints): &(Required<Retrieved>, Option<Hints>)) -> bool { hints.is_some() }
//! Workflow::builder("Rag").step(answer_step())
//! ```
//!
//! `delegates_to = ["Researcher"]` declares the agents a step's delegation requests name
//! (`Step::delegates_to`: `check` warns of one the workflow does not know, SAAP022).
//!
//! `#[agent]` on an `impl` block turns its `#[step]` functions into the agent's workflow
//! (`impl saap::Agent`); steps take no `self` (stateless by construction), preconditions take
//! one reference per event parameter:
//!
//! ```ignore
//! #[agent(config = RagConfig, events = [ChunkEvent])]
//! impl RagAgent {
//!     #[step(precondition = Self::hints_arrived, max_executions_per_run = 1)]
//!     async fn answer(r: Required<Retrieved>, hints: Option<Hints>, cfg: Config<RagConfig>)
//!         -> Result<Answered, StepError> { … }
//!     fn hints_arrived(_r: &Required<Retrieved>, hints: &Option<Hints>) -> bool { hints.is_some() }
//!
//!     // `config_precondition` also passes the run's agent config (last argument).
//!     #[step(config_precondition = Self::ready)]
//!     async fn review(d: Required<Draft>, notes: Option<Notes>) -> Result<Reviewed, StepError> { … }
//!     fn ready(_d: &Required<Draft>, notes: &Option<Notes>, cfg: &RagConfig) -> bool {
//!         !cfg.wait_for_notes || notes.is_some()
//!     }
//! }
//! saap::agent_main::<RagAgent>()
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

/// `#[agent]` on an `impl` block: its `#[step]` functions become the agent's workflow
/// (`impl saap::Agent`).
#[proc_macro_attribute]
pub fn agent(attr: TokenStream, item: TokenStream) -> TokenStream {
    let block = parse_macro_input!(item as syn::ItemImpl);
    match expand_agent(attr.into(), block) {
        Ok(ts) => ts.into(),
        Err(e) => e.to_compile_error().into(),
    }
}

/// The last path segment of a type, with its generic argument if it has exactly one type.
fn type_head(ty: &syn::Type) -> Option<(String, Option<syn::Type>)> {
    let syn::Type::Path(p) = ty else {
        return None;
    };
    let seg = p.path.segments.last()?;
    let arg = match &seg.arguments {
        syn::PathArguments::AngleBracketed(a) if a.args.len() == 1 => match a.args.first() {
            Some(syn::GenericArgument::Type(t)) => Some(t.clone()),
            _ => None,
        },
        _ => None,
    };
    Some((seg.ident.to_string(), arg))
}

/// What a step parameter is.
enum Param {
    /// An event parameter (its kind comes from its type).
    Event(syn::Type),
    /// An injectable: the expression that makes it from `__ctx`.
    Injected(proc_macro2::TokenStream),
}

const SIGNATURE_HELP: &str = "a step's parameters are event parameters (`Required<T>`, `Option<T>`, `Vec<T>`, `FixedList<T, N>` where `T` is an event type or a union of them, or a bare union: `Either<A, B>` or a `#[derive(EventUnion)]` enum) and injectables (`StepCtx`, `RunContext`, `ThreadContext`, `Config<C>`, `StepConfig<S>`, `Res<T>`), all by value";

fn classify(
    ty: &syn::Type,
    step_name: &str,
    declared_config: Option<&syn::Type>,
    options: &mut Vec<proc_macro2::TokenStream>,
) -> syn::Result<Param> {
    if let syn::Type::Reference(r) = ty {
        let inner = &r.elem;
        return Err(syn::Error::new_spanned(
            ty,
            format!(
                "take `{}` by value, not by reference: {SIGNATURE_HELP}",
                quote!(#inner)
            ),
        ));
    }
    let Some((head, arg)) = type_head(ty) else {
        return Err(syn::Error::new_spanned(ty, SIGNATURE_HELP));
    };
    Ok(match (head.as_str(), arg) {
        ("StepCtx", None) => Param::Injected(quote! { ::std::clone::Clone::clone(&__ctx) }),
        ("RunContext", None) => Param::Injected(quote! { __ctx.run_context() }),
        ("ThreadContext", None) => Param::Injected(quote! { __ctx.thread_context() }),
        ("Config", Some(c)) => {
            if let Some(d) = declared_config
                && quote!(#d).to_string() != quote!(#c).to_string()
            {
                return Err(syn::Error::new_spanned(
                    ty,
                    format!(
                        "this agent's config is `{}` (`#[agent(config = ...)]`); write `Config<{}>`, or put `{}` in a step config (`StepConfig<{}>`)",
                        quote!(#d),
                        quote!(#d),
                        quote!(#c),
                        quote!(#c)
                    ),
                ));
            }
            options.push(quote! { .uses_config::<#c>() });
            Param::Injected(quote! { __ctx.config::<#c>()? })
        }
        ("StepConfig", Some(s)) => {
            options.push(quote! { .uses_step_config::<#s>() });
            Param::Injected(quote! { __ctx.step_config::<#s>(#step_name)? })
        }
        ("Res", Some(r)) => {
            options.push(quote! { .uses_resource::<#r>() });
            Param::Injected(quote! { __ctx.resource::<#r>()? })
        }
        ("Res", None) => {
            return Err(syn::Error::new_spanned(
                ty,
                "name the resource type: `Res<MyClient>` (registered once with `.resource(value)` on the workflow)",
            ));
        }
        ("Config" | "StepConfig", None) => {
            return Err(syn::Error::new_spanned(
                ty,
                "name the config type: `Config<MyConfig>` or `StepConfig<MyStepConfig>`",
            ));
        }
        ("Self", _) => {
            return Err(syn::Error::new_spanned(
                ty,
                "a step cannot take the agent value: steps are stateless; read settings from `Config<C>` and keep run state in events or RunContext",
            ));
        }
        _ => {
            if let Some((outer, inner)) = param_kind(ty)
                && let Some((kind, _)) = param_kind(&inner)
            {
                return Err(syn::Error::new_spanned(
                    ty,
                    format!(
                        "parameter kinds do not nest (`{outer}` of `{kind}`): a parameter is `Required<T>`, `Option<T>`, `Vec<T>` or `FixedList<T, N>` where `T` is an event type or a `#[derive(EventUnion)]` enum; {}",
                        nesting_help(&outer, &kind)
                    ),
                ));
            }
            Param::Event(ty.clone())
        }
    })
}

/// The kind of an event parameter type and its element type: `Vec<T>` → ("Vec", T).
fn param_kind(ty: &syn::Type) -> Option<(String, syn::Type)> {
    let syn::Type::Path(p) = ty else {
        return None;
    };
    let seg = p.path.segments.last()?;
    let kind = seg.ident.to_string();
    if !matches!(kind.as_str(), "Required" | "Option" | "Vec" | "FixedList") {
        return None;
    }
    let syn::PathArguments::AngleBracketed(a) = &seg.arguments else {
        return None;
    };
    match a.args.first() {
        Some(syn::GenericArgument::Type(t)) => Some((kind, t.clone())),
        _ => None,
    }
}

/// What to write instead of a nested parameter kind.
fn nesting_help(outer: &str, inner: &str) -> &'static str {
    match (outer, inner) {
        ("Vec" | "FixedList", "Option" | "Required") => {
            "write `Vec<T>` (never blocks, may be empty) or `FixedList<T, N>` (waits for N)"
        }
        ("Option", "Vec") => "write `Vec<T>`: a list never blocks and may be empty",
        ("Option", _) | (_, "Option") => {
            "write `Option<T>` (never blocks) or `Required<T>` (waits for one)"
        }
        _ => "take each kind as its own parameter, or group the events into one event type",
    }
}

/// How a precondition function is called.
#[derive(Clone, Copy, PartialEq, Eq)]
enum PreconditionStyle {
    /// `fn(&(A, B)) -> bool`, the step's input tuple (free `#[step]` functions).
    Tuple,
    /// `fn(&A, &B) -> bool`, one reference per event parameter (`#[agent]` methods).
    PerParam,
}

/// The expression that builds the step (a `saap::Step<..>`).
fn step_expr(
    attr: proc_macro2::TokenStream,
    sig: &syn::Signature,
    call: proc_macro2::TokenStream,
    style: PreconditionStyle,
    declared_config: Option<&syn::Type>,
) -> syn::Result<proc_macro2::TokenStream> {
    if sig.asyncness.is_none() {
        return Err(syn::Error::new_spanned(
            sig.fn_token,
            "a step must be an `async fn`; write `async fn`",
        ));
    }
    if !sig.generics.params.is_empty() {
        return Err(syn::Error::new_spanned(
            &sig.generics,
            "a step cannot be generic: the spec needs concrete event types; write one step per event type",
        ));
    }
    if let syn::ReturnType::Default = sig.output {
        return Err(syn::Error::new_spanned(
            sig,
            "a step returns `Result<T, StepError>` where T is an event or a union of events (`Either<A, B>`, a `#[derive(EventUnion)]` enum), `Option` or `Vec` of one, a tuple of events, or `()`; write `-> Result<(), StepError>` for a step that returns nothing",
        ));
    }
    let mut step_name = sig.ident.to_string();
    let mut options = Vec::new();
    let mut precondition = None;
    let mut with_config = false;
    let metas = Punctuated::<Meta, Token![,]>::parse_terminated.parse2(attr)?;
    for meta in metas {
        let Meta::NameValue(nv) = &meta else {
            return Err(syn::Error::new_spanned(
                &meta,
                "write `precondition = path`, `config_precondition = path`, `max_executions_per_run = N`, `stop_on_error = bool`, `delegates_to = [\"Agent\"]` or `name = \"...\"`",
            ));
        };
        let v = &nv.value;
        if nv.path.is_ident("precondition") || nv.path.is_ident("config_precondition") {
            if precondition.is_some() {
                return Err(syn::Error::new_spanned(
                    &nv.path,
                    "a step has one precondition; combine the conditions in one function",
                ));
            }
            with_config = nv.path.is_ident("config_precondition");
            precondition = Some(v.clone());
        } else if nv.path.is_ident("max_executions_per_run") {
            options.push(quote! { .max_executions_per_run(#v) });
        } else if nv.path.is_ident("stop_on_error") {
            options.push(quote! { .stop_on_error(#v) });
        } else if nv.path.is_ident("delegates_to") {
            let agents = agent_names(v)?;
            options.push(quote! { .delegates_to([#(#agents),*]) });
        } else if nv.path.is_ident("name") {
            step_name = name_of(v)?;
        } else {
            return Err(syn::Error::new_spanned(
                &nv.path,
                "unknown step option; write `precondition = path`, `config_precondition = path` (a precondition that also reads the agent config), `max_executions_per_run = N`, `stop_on_error = bool`, `delegates_to = [\"Agent\"]` (the agents its delegation requests name) or `name = \"...\"`",
            ));
        }
    }
    let mut names = Vec::new();
    let mut types = Vec::new();
    let mut args = Vec::new();
    let mut lets = Vec::new();
    for arg in &sig.inputs {
        let syn::FnArg::Typed(pt) = arg else {
            return Err(syn::Error::new_spanned(
                arg,
                "a step takes no `self`: steps are stateless (each execution may run in another process); remove `self`, read settings from a `Config<C>` parameter and keep run state in events or RunContext",
            ));
        };
        match classify(&pt.ty, &step_name, declared_config, &mut options)? {
            Param::Event(ty) => {
                let syn::Pat::Ident(id) = &*pt.pat else {
                    return Err(syn::Error::new_spanned(
                        &pt.pat,
                        "write a plain parameter name (the spec uses it), e.g. `hints: Option<Hints>`",
                    ));
                };
                names.push(id.ident.to_string());
                let p = quote::format_ident!("__p{}", types.len());
                args.push(quote! { #p });
                types.push(ty);
            }
            Param::Injected(expr) => {
                let v = quote::format_ident!("__i{}", lets.len());
                lets.push(quote! { let #v = #expr; });
                args.push(quote! { #v });
            }
        }
    }
    if types.is_empty() {
        return Err(syn::Error::new_spanned(
            &sig.inputs,
            "a step needs at least one event parameter (Required<T>, Option<T>, Vec<T>, FixedList<T, N> or a union enum): nothing could trigger it otherwise",
        ));
    }
    if types.len() > 6 {
        return Err(syn::Error::new_spanned(
            &sig.inputs,
            "a step takes at most 6 event parameters; group inputs into fewer event types",
        ));
    }
    let pats: Vec<proc_macro2::Ident> = (0..types.len())
        .map(|i| quote::format_ident!("__p{}", i))
        .collect();
    let (input_ty, input_pat) = if types.len() == 1 {
        let t = &types[0];
        let p = &pats[0];
        (quote! { #t }, quote! { #p })
    } else {
        (quote! { (#(#types,)*) }, quote! { (#(#pats,)*) })
    };
    if let Some(v) = precondition {
        let pname = name_of(&v)?;
        options.push(match (style, with_config) {
            (PreconditionStyle::Tuple, false) => quote! { .precondition(#pname, #v) },
            (PreconditionStyle::Tuple, true) => {
                quote! { .precondition_with_config(#pname, #v) }
            }
            (PreconditionStyle::PerParam, false) => {
                quote! { .precondition(#pname, |#input_pat: &#input_ty| #v(#(#pats),*)) }
            }
            (PreconditionStyle::PerParam, true) => {
                quote! { .precondition_with_config(#pname, |#input_pat: &#input_ty, __cfg| #v(#(#pats,)* __cfg)) }
            }
        });
    }
    Ok(quote! {
        ::saap::Step::new(#step_name, |#input_pat: #input_ty, __ctx: ::saap::StepCtx| async move {
            let _ = &__ctx;
            #(#lets)*
            #call(#(#args),*).await
        })
        .param_names(&[#(#names),*])
        #(#options)*
    })
}

fn expand_step(
    attr: proc_macro2::TokenStream,
    func: &syn::ItemFn,
) -> syn::Result<proc_macro2::TokenStream> {
    let sig = &func.sig;
    let fname = &sig.ident;
    let built = step_expr(attr, sig, quote! { #fname }, PreconditionStyle::Tuple, None)?;
    let vis = &func.vis;
    let ctor = quote::format_ident!("{}_step", fname);
    let step_name = fname.to_string();
    let mut types = Vec::new();
    for arg in &sig.inputs {
        if let syn::FnArg::Typed(pt) = arg
            && let Ok(Param::Event(t)) = classify(&pt.ty, "", None, &mut Vec::new())
        {
            types.push(t);
        }
    }
    let input_ty = if types.len() == 1 {
        let t = &types[0];
        quote! { #t }
    } else {
        quote! { (#(#types,)*) }
    };
    Ok(quote! {
        #func

        #[doc = concat!("The step `", #step_name, "` (generated by `#[step]`).")]
        #vis fn #ctor() -> ::saap::Step<#input_ty> {
            #built
        }
    })
}

fn is_step_attr(a: &syn::Attribute) -> bool {
    let segs: Vec<String> = a
        .path()
        .segments
        .iter()
        .map(|s| s.ident.to_string())
        .collect();
    segs == ["step"] || segs == ["saap", "step"]
}

fn expand_agent(
    attr: proc_macro2::TokenStream,
    mut block: syn::ItemImpl,
) -> syn::Result<proc_macro2::TokenStream> {
    if block.trait_.is_some() {
        return Err(syn::Error::new_spanned(
            &block.self_ty,
            "`#[agent]` goes on the agent's own `impl` block (`impl MyAgent { ... }`), not on a trait impl",
        ));
    }
    if !block.generics.params.is_empty() {
        return Err(syn::Error::new_spanned(
            &block.generics,
            "an agent cannot be generic: its spec needs concrete event types",
        ));
    }
    let self_ty = block.self_ty.clone();
    let mut name = match &*self_ty {
        syn::Type::Path(p) => p
            .path
            .segments
            .last()
            .map(|s| s.ident.to_string())
            .unwrap_or_default(),
        _ => String::new(),
    };
    let mut config: Option<syn::Type> = None;
    let mut events: Vec<syn::Type> = Vec::new();
    let mut description: Option<String> = None;
    let metas = Punctuated::<Meta, Token![,]>::parse_terminated.parse2(attr)?;
    for meta in metas {
        let Meta::NameValue(nv) = &meta else {
            return Err(syn::Error::new_spanned(
                &meta,
                "write `name = \"...\"`, `config = Type`, `events = [A, B]` or `description = \"...\"`",
            ));
        };
        let v = &nv.value;
        if nv.path.is_ident("name") {
            name = name_of(v)?;
        } else if nv.path.is_ident("config") {
            config = Some(syn::parse2(quote!(#v))?);
        } else if nv.path.is_ident("events") {
            let Expr::Array(arr) = v else {
                return Err(syn::Error::new_spanned(v, "write `events = [A, B]`"));
            };
            for e in &arr.elems {
                events.push(syn::parse2(quote!(#e))?);
            }
        } else if nv.path.is_ident("description") {
            let Expr::Lit(syn::ExprLit {
                lit: Lit::Str(s), ..
            }) = v
            else {
                return Err(syn::Error::new_spanned(v, "write `description = \"...\"`"));
            };
            description = Some(s.value());
        } else {
            return Err(syn::Error::new_spanned(
                &nv.path,
                "unknown agent option; write `name = \"...\"`, `config = Type`, `events = [A, B]` or `description = \"...\"`",
            ));
        }
    }
    let mut steps = Vec::new();
    for item in &mut block.items {
        let syn::ImplItem::Fn(f) = item else {
            continue;
        };
        let Some(pos) = f.attrs.iter().position(is_step_attr) else {
            continue;
        };
        let a = f.attrs.remove(pos);
        let args = match &a.meta {
            Meta::Path(_) => proc_macro2::TokenStream::new(),
            Meta::List(l) => l.tokens.clone(),
            Meta::NameValue(_) => {
                return Err(syn::Error::new_spanned(
                    &a,
                    "write `#[step]` or `#[step(option = value, ...)]`",
                ));
            }
        };
        let fname = &f.sig.ident;
        steps.push(step_expr(
            args,
            &f.sig,
            quote! { <#self_ty>::#fname },
            PreconditionStyle::PerParam,
            config.as_ref(),
        )?);
    }
    if steps.is_empty() {
        return Err(syn::Error::new_spanned(
            &block.self_ty,
            "this agent has no steps; mark its async functions with `#[step]`",
        ));
    }
    let config_decl = config.iter().map(|c| quote! { .config::<#c>() });
    let description = description.iter().map(|d| quote! { .description(#d) });
    Ok(quote! {
        #block

        impl ::saap::Agent for #self_ty {
            const NAME: &'static str = #name;
            fn workflow() -> ::std::result::Result<::saap::Workflow, ::saap::BuildError> {
                ::saap::Workflow::builder(#name)
                    #(#description)*
                    #(#config_decl)*
                    #(.event::<#events>())*
                    #(.step(#steps))*
                    .build()
            }
        }
    })
}

/// `#[derive(EventUnion)]` on an enum whose variants each hold one event type (or another
/// union): a union of event types for any parameter kind (a bare union is a required
/// parameter; `Option<U>`, `Vec<U>`, `FixedList<U, N>` bind events of every member type) and a
/// step result (one of them).
#[proc_macro_derive(EventUnion)]
pub fn derive_event_union(input: TokenStream) -> TokenStream {
    let input = parse_macro_input!(input as DeriveInput);
    match expand_union(&input) {
        Ok(ts) => ts.into(),
        Err(e) => e.to_compile_error().into(),
    }
}

fn expand_union(input: &DeriveInput) -> syn::Result<proc_macro2::TokenStream> {
    const HELP: &str = "an event union is an enum with one event type per variant: `enum Decision { Approved(Approved), Rejected(Rejected) }`";
    let syn::Data::Enum(data) = &input.data else {
        return Err(syn::Error::new_spanned(&input.ident, HELP));
    };
    if !input.generics.params.is_empty() {
        return Err(syn::Error::new_spanned(
            &input.generics,
            "an event union cannot be generic: name its event types",
        ));
    }
    if data.variants.len() < 2 {
        return Err(syn::Error::new_spanned(
            &input.ident,
            "an event union needs at least two variants; for one event type take the type itself (`Required<T>`)",
        ));
    }
    let mut variants = Vec::new();
    let mut types = Vec::new();
    for v in &data.variants {
        let syn::Fields::Unnamed(f) = &v.fields else {
            return Err(syn::Error::new_spanned(v, HELP));
        };
        if f.unnamed.len() != 1 {
            return Err(syn::Error::new_spanned(v, HELP));
        }
        let ty = &f.unnamed[0].ty;
        if let Some((kind, _)) = param_kind(ty) {
            return Err(syn::Error::new_spanned(
                ty,
                format!(
                    "a union variant holds one event type (or another union), not `{kind}<..>`; put the kind on the step's parameter instead, e.g. `Vec<{}>`",
                    input.ident
                ),
            ));
        }
        variants.push(v.ident.clone());
        types.push(ty.clone());
    }
    let ident = &input.ident;
    Ok(quote! {
        impl ::saap::params::ParamEvent for #ident {
            fn members() -> ::std::vec::Vec<(&'static str, &'static [&'static str])> {
                let mut m = ::std::vec::Vec::new();
                #(m.extend(<#types as ::saap::params::ParamEvent>::members());)*
                m
            }
            fn accepts(name: &str) -> bool {
                #(<#types as ::saap::params::ParamEvent>::accepts(name))||*
            }
            fn from_bound(
                index: usize,
                event: &::saap::params::BoundEvent,
            ) -> ::std::result::Result<Self, ::saap::params::InputError> {
                #(
                    if <#types as ::saap::params::ParamEvent>::accepts(&event.name) {
                        return ::std::result::Result::Ok(#ident::#variants(
                            <#types as ::saap::params::ParamEvent>::from_bound(index, event)?,
                        ));
                    }
                )*
                ::std::result::Result::Err(::saap::union::not_a_member::<Self>(index, event))
            }
        }

        impl ::saap::params::Param for #ident {
            fn decl() -> ::saap::params::ParamDecl {
                ::saap::union::required::<Self>()
            }
            fn extract(
                index: usize,
                bound: &[::saap::params::BoundEvent],
            ) -> ::std::result::Result<Self, ::saap::params::InputError> {
                ::saap::union::extract_one::<Self>(index, bound)
            }
        }

        impl ::saap::params::Outputs for #ident {
            fn declare(decl: &mut ::saap::params::OutputDecl) {
                #(<#types as ::saap::params::Outputs>::declare(decl);)*
            }
            fn collect(
                self,
                out: &mut ::std::vec::Vec<::saap::params::OutEvent>,
            ) -> ::std::result::Result<(), ::saap::event::PayloadError> {
                match self {
                    #(#ident::#variants(e) => ::saap::params::Outputs::collect(e, out),)*
                }
            }
        }
    })
}

/// The agent names of `delegates_to = ["A", "B"]` (or one `"A"`).
fn agent_names(v: &syn::Expr) -> syn::Result<Vec<String>> {
    let one = |e: &syn::Expr| match e {
        syn::Expr::Lit(syn::ExprLit {
            lit: syn::Lit::Str(s),
            ..
        }) => Ok(s.value()),
        other => Err(syn::Error::new_spanned(
            other,
            "write the agents as names in quotes: `delegates_to = [\"Researcher\"]`",
        )),
    };
    match v {
        syn::Expr::Array(a) => a.elems.iter().map(one).collect(),
        other => one(other).map(|a| vec![a]),
    }
}
