; Definitions: @def.<kind> on the definition, @name on its name.
(class_declaration name: (type_identifier) @name) @def.class
(abstract_class_declaration name: (type_identifier) @name) @def.class
(class name: (type_identifier) @name) @def.class
(interface_declaration name: (type_identifier) @name) @def.interface
(enum_declaration name: (identifier) @name) @def.enum
(type_alias_declaration name: (type_identifier) @name) @def.type
(internal_module name: (identifier) @name) @def.module
(function_declaration name: (identifier) @name) @def.function
(generator_function_declaration name: (identifier) @name) @def.function
(function_signature name: (identifier) @name) @def.function
(method_definition name: [(property_identifier) (private_property_identifier)] @name) @def.method
(method_signature name: (property_identifier) @name) @def.method
(abstract_method_signature name: (property_identifier) @name) @def.method
(variable_declarator
  name: (identifier) @name
  value: [(arrow_function) (function_expression) (generator_function)]) @def.function
; A function value in parentheses or under a type assertion: `const f = ((x) => ...) as F`.
(variable_declarator
  name: (identifier) @name
  value: [(parenthesized_expression [(arrow_function) (function_expression) (generator_function)])
          (as_expression [(arrow_function) (function_expression) (generator_function)
                          (parenthesized_expression [(arrow_function) (function_expression) (generator_function)])])
          (satisfies_expression [(arrow_function) (function_expression) (generator_function)
                                 (parenthesized_expression [(arrow_function) (function_expression) (generator_function)])])]) @def.function

; include: ecmascript

; Inheritance: extends and implements.
(class_declaration (class_heritage (extends_clause value: (_) @inherit.base))) @inherit.owner
(class_declaration (class_heritage (implements_clause (_) @inherit.base))) @inherit.owner
(abstract_class_declaration (class_heritage (extends_clause value: (_) @inherit.base))) @inherit.owner
(abstract_class_declaration (class_heritage (implements_clause (_) @inherit.base))) @inherit.owner
(interface_declaration (extends_type_clause type: (_) @inherit.base)) @inherit.owner

; Imports: ES modules, re-exports, CommonJS require.
(import_statement) @import
(export_statement source: (string)) @import
((call_expression
   function: (identifier) @_require
   arguments: (arguments . (string)))
 (#eq? @_require "require")) @import.require

; Default export name.
(export_statement "default" [(identifier) @export.default
                            (class_declaration name: (type_identifier) @export.default)
                            (abstract_class_declaration name: (type_identifier) @export.default)
                            (function_declaration name: (identifier) @export.default)])

; Call sites, including constructor calls.
(call_expression function: (_) @callee) @call
(new_expression constructor: (_) @callee) @call

; Type facts: annotations, constructions, and the call that produced a value.
(required_parameter pattern: (identifier) @bind.var type: (type_annotation (_) @bind.type))
(optional_parameter pattern: (identifier) @bind.var type: (type_annotation (_) @bind.type))
(required_parameter (accessibility_modifier) pattern: (identifier) @field.var type: (type_annotation (_) @field.type))
(public_field_definition name: (property_identifier) @bind.var type: (type_annotation (_) @bind.type))
(public_field_definition name: (property_identifier) @bind.var value: (new_expression constructor: (_) @bind.type))
(variable_declarator name: (identifier) @bind.var type: (type_annotation (_) @bind.type))
(variable_declarator name: (identifier) @bind.var value: (new_expression constructor: (_) @bind.type))
(variable_declarator name: (identifier) @bind.var value: (call_expression function: (_) @bind.call))
(variable_declarator name: (identifier) @bind.var value: (await_expression (call_expression function: (_) @bind.call)))
(assignment_expression left: (member_expression) @bind.var right: (new_expression constructor: (_) @bind.type))
(assignment_expression left: (member_expression) @bind.var right: (identifier) @bind.alias)
