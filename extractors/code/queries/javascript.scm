; Definitions: @def.<kind> on the definition, @name on its name.
(class_declaration name: (identifier) @name) @def.class
(class name: (identifier) @name) @def.class
(function_declaration name: (identifier) @name) @def.function
(generator_function_declaration name: (identifier) @name) @def.function
(method_definition name: [(property_identifier) (private_property_identifier)] @name) @def.method
(variable_declarator
  name: (identifier) @name
  value: [(arrow_function) (function_expression) (generator_function)]) @def.function
; A function value in parentheses: `const f = (function () { ... })`.
(variable_declarator
  name: (identifier) @name
  value: (parenthesized_expression [(arrow_function) (function_expression) (generator_function)])) @def.function

; include: ecmascript

; Inheritance.
(class_declaration (class_heritage [(identifier) (member_expression)] @inherit.base)) @inherit.owner

; Imports: ES modules, re-exports, CommonJS require.
(import_statement) @import
(export_statement source: (string)) @import
((call_expression
   function: (identifier) @_require
   arguments: (arguments . (string)))
 (#eq? @_require "require")) @import.require

; Default export name.
(export_statement "default" [(identifier) @export.default
                            (class_declaration name: (identifier) @export.default)
                            (function_declaration name: (identifier) @export.default)])

; Call sites, including constructor calls.
(call_expression function: (_) @callee) @call
(new_expression constructor: (_) @callee) @call

; Type facts.
(variable_declarator name: (identifier) @bind.var value: (new_expression constructor: (_) @bind.type))
(variable_declarator name: (identifier) @bind.var value: (call_expression function: (_) @bind.call))
(variable_declarator name: (identifier) @bind.var value: (await_expression (call_expression function: (_) @bind.call)))
(assignment_expression left: (member_expression) @bind.var right: (new_expression constructor: (_) @bind.type))
