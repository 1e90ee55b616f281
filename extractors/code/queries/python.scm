; Definitions: @def.<kind> on the definition, @name on its name.
(class_definition name: (identifier) @name) @def.class
(function_definition name: (identifier) @name) @def.function

; Inheritance: @inherit.owner is the class, @inherit.base one base as written.
(class_definition
  superclasses: (argument_list [(identifier) (attribute) (subscript)] @inherit.base)) @inherit.owner

; Imports (interpreted in code).
(import_statement) @import
(import_from_statement) @import

; Call sites.
(call function: (_) @callee) @call
; A decorator written without arguments (`@fixture`) is called with the definition it decorates.
(decorator [(identifier) (attribute)] @callee) @call

; Type facts: variable -> declared type (@bind.type) or the call that produced it (@bind.call).
(assignment left: [(identifier) (attribute)] @bind.var type: (type) @bind.type)
(assignment left: [(identifier) (attribute)] @bind.var right: (call function: [(identifier) (attribute)] @bind.call))
(typed_parameter (identifier) @bind.var type: (type) @bind.type)
(typed_default_parameter name: (identifier) @bind.var type: (type) @bind.type)
; `self.x = x` copies the type of a parameter or local.
(assignment left: (attribute) @bind.var right: (identifier) @bind.alias)
