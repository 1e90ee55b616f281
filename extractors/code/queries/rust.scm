; Definitions: @def.<kind> on the definition, @name on its name.
(struct_item name: (type_identifier) @name) @def.struct
(union_item name: (type_identifier) @name) @def.struct
(enum_item name: (type_identifier) @name) @def.enum
(trait_item name: (type_identifier) @name) @def.trait
; Type aliases of a file or module; an associated type of a trait impl (`type Error = InvalidUri;`)
; is a detail of that impl, not a definition of its own.
(source_file (type_item name: (type_identifier) @name) @def.type)
(mod_item body: (declaration_list (type_item name: (type_identifier) @name) @def.type))
(function_item name: (identifier) @name) @def.function
(function_signature_item name: (identifier) @name) @def.function
(mod_item name: (identifier) @name body: (declaration_list)) @def.module

; impl blocks name the type their methods belong to (Type.method); a trait impl is inheritance.
(impl_item type: (_) @impl.type) @impl
(impl_item trait: (_) @impl.trait type: (_) @impl.type)
(trait_item bounds: (trait_bounds (_) @inherit.base)) @inherit.owner

; Imports: `use` trees and out-of-line `mod name;`.
(use_declaration) @import
(mod_item name: (identifier) @import.mod !body)

; Call sites.
(call_expression function: (_) @callee) @call

; Type facts: annotated or constructed bindings, parameters, struct fields.
(let_declaration pattern: (identifier) @bind.var type: (_) @bind.type)
(let_declaration pattern: (identifier) @bind.var value: (call_expression function: (_) @bind.call))
(let_declaration pattern: (identifier) @bind.var value: (struct_expression name: (_) @bind.type))
(parameter pattern: (identifier) @bind.var type: (_) @bind.type)
(field_declaration name: (field_identifier) @bind.var type: (_) @bind.type)

; Macro arguments are token trees; call-like token runs inside them are read in code.
(macro_invocation (token_tree) @macro.args)
