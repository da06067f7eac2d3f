//! The attributes that switch a test off or make it expect a panic, found
//! by parsing the source with `syn` rather than by searching its text: the
//! ignore attribute in each form (bare, with a reason), the panic
//! expectation (bare or with `expected`), and either one inside a
//! `cfg_attr` under any condition, nested `cfg_attr`s included, on any item
//! and within macro bodies; and a doc example whose fence says `ignore` or
//! `should_panic` (a doctest switched off). A string or a comment that
//! mentions them is no attribute and passes.

use syn::punctuated::Punctuated;
use syn::visit::Visit;
use syn::{Attribute, ImplItemFn, ItemFn, Macro, Meta, Token};

/// The attribute names that must not appear, matched on the path's last segment.
const FORBIDDEN: [&str; 2] = ["ignore", "should_panic"];

/// Each forbidden attribute in `source`, as "`#[name]` on `fn item`" (the
/// function is named when the attribute sits on one or in one); an error
/// when the source is not Rust.
pub(crate) fn switched_off(source: &str) -> Result<Vec<String>, String> {
    let file = syn::parse_file(source).map_err(|err| err.to_string())?;
    let mut finder = Finder::default();
    finder.visit_file(&file);
    Ok(finder.found)
}

#[derive(Default)]
struct Finder {
    /// The function being walked, to name where an attribute is.
    function: Option<String>,
    found: Vec<String>,
}

impl Finder {
    fn record(&mut self, names: Vec<String>) {
        for name in names {
            let place = self.function.as_ref().map(|f| format!(" on `fn {f}`")).unwrap_or_default();
            self.found.push(format!("#[{name}]{place}"));
        }
    }

    fn in_function(&mut self, name: String, walk: impl FnOnce(&mut Finder)) {
        let outer = self.function.replace(name);
        walk(self);
        self.function = outer;
    }
}

impl<'ast> Visit<'ast> for Finder {
    fn visit_item_fn(&mut self, item: &'ast ItemFn) {
        self.in_function(item.sig.ident.to_string(), |finder| syn::visit::visit_item_fn(finder, item));
    }

    fn visit_impl_item_fn(&mut self, item: &'ast ImplItemFn) {
        self.in_function(item.sig.ident.to_string(), |finder| syn::visit::visit_impl_item_fn(finder, item));
    }

    fn visit_attribute(&mut self, attribute: &'ast Attribute) {
        let mut names = forbidden_in(&attribute.meta);
        names.extend(in_doc_fences(&attribute.meta));
        self.record(names);
        syn::visit::visit_attribute(self, attribute);
    }

    /// A macro's body is tokens to `syn`: attributes in it are found by
    /// their shape, `#` (and `!`) before a bracketed group.
    fn visit_macro(&mut self, mac: &'ast Macro) {
        let names = in_tokens(mac.tokens.clone());
        self.record(names);
        syn::visit::visit_macro(self, mac);
    }
}

/// The forbidden attributes an attribute's content amounts to: itself, or
/// what a `cfg_attr` applies under its condition.
fn forbidden_in(meta: &Meta) -> Vec<String> {
    let path = meta.path();
    let Some(last) = path.segments.last() else { return Vec::new() };
    let name = last.ident.to_string();
    if FORBIDDEN.contains(&name.as_str()) {
        return vec![name];
    }
    if name != "cfg_attr" {
        return Vec::new();
    }
    let Meta::List(list) = meta else { return Vec::new() };
    match list.parse_args_with(Punctuated::<Meta, Token![,]>::parse_terminated) {
        // The first is the condition; the rest are applied under it.
        Ok(parts) => parts
            .iter()
            .skip(1)
            .flat_map(forbidden_in)
            .map(|inner| format!("cfg_attr(.., {inner})"))
            .collect(),
        // Not attributes as `syn` knows them: judge the words alone.
        Err(_) => in_words(list.tokens.clone()),
    }
}

/// The forbidden words in the info strings of a doc comment's code fences
/// (```` ```ignore ````, ```` ```rust,should_panic ````): doctests switched off.
fn in_doc_fences(meta: &Meta) -> Vec<String> {
    let Meta::NameValue(pair) = meta else { return Vec::new() };
    if !pair.path.is_ident("doc") {
        return Vec::new();
    }
    let syn::Expr::Lit(syn::ExprLit { lit: syn::Lit::Str(text), .. }) = &pair.value else {
        return Vec::new();
    };
    let text = text.value();
    let fences = text.lines().filter_map(|line| line.trim().strip_prefix("```"));
    fences
        .flat_map(|info| {
            info.split(|c: char| c == ',' || c.is_whitespace()).map(str::to_string).collect::<Vec<_>>()
        })
        .filter(|word| FORBIDDEN.contains(&word.as_str()))
        .map(|word| format!("doctest {word}"))
        .collect()
}

/// The attributes within a macro body, at any depth.
fn in_tokens(tokens: proc_macro2::TokenStream) -> Vec<String> {
    use proc_macro2::{Delimiter, TokenTree};
    let trees: Vec<TokenTree> = tokens.into_iter().collect();
    let mut found = Vec::new();
    for (at, tree) in trees.iter().enumerate() {
        let TokenTree::Group(group) = tree else { continue };
        let hash_before = |back: usize| {
            at >= back && matches!(&trees[at - back], TokenTree::Punct(p) if p.as_char() == '#')
        };
        let bang_before = at >= 1 && matches!(&trees[at - 1], TokenTree::Punct(p) if p.as_char() == '!');
        let is_attribute =
            group.delimiter() == Delimiter::Bracket && (hash_before(1) || (bang_before && hash_before(2)));
        if is_attribute {
            match syn::parse2::<Meta>(group.stream()) {
                Ok(meta) => found.extend(forbidden_in(&meta)),
                Err(_) => found.extend(in_words(group.stream())),
            }
        }
        found.extend(in_tokens(group.stream()));
    }
    found
}

/// The forbidden names among the identifiers of an attribute `syn` cannot
/// read as one (a macro's `$meta`, say), strings and comments aside.
fn in_words(tokens: proc_macro2::TokenStream) -> Vec<String> {
    use proc_macro2::TokenTree;
    tokens
        .into_iter()
        .flat_map(|tree| match tree {
            TokenTree::Ident(ident) if FORBIDDEN.contains(&ident.to_string().as_str()) => {
                vec![ident.to_string()]
            }
            TokenTree::Group(group) => in_words(group.stream()),
            _ => Vec::new(),
        })
        .collect()
}
