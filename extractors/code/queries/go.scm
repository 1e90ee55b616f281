; Definitions: @def.<kind> on the definition, @name on its name, @receiver the method's receiver type.
(function_declaration name: (identifier) @name) @def.function
(method_declaration
  receiver: (parameter_list (parameter_declaration type: (_) @receiver))
  name: (field_identifier) @name) @def.method
(type_spec name: (type_identifier) @name type: (struct_type)) @def.struct
(type_spec name: (type_identifier) @name type: (interface_type)) @def.interface
(type_spec name: (type_identifier) @name) @def.type
(type_alias name: (type_identifier) @name) @def.type
(method_elem name: (field_identifier) @name) @def.method

; Embedding counts as inheritance.
(type_spec type: (struct_type (field_declaration_list
  (field_declaration !name type: (_) @inherit.base)))) @inherit.owner
(type_spec type: (interface_type (type_elem (_) @inherit.base))) @inherit.owner

(package_clause (package_identifier) @package)
(import_spec) @import

; Call sites.
(call_expression function: (_) @callee) @call

; Type facts: parameters (receivers included), declarations, struct fields, literals, calls.
(parameter_declaration name: (identifier) @bind.var type: (_) @bind.type)
(var_spec name: (identifier) @bind.var type: (_) @bind.type)
(field_declaration name: (field_identifier) @bind.var type: (_) @bind.type)
(short_var_declaration
  left: (expression_list . (identifier) @bind.var)
  right: (expression_list . (composite_literal type: (_) @bind.type)))
(short_var_declaration
  left: (expression_list . (identifier) @bind.var)
  right: (expression_list . (unary_expression operand: (composite_literal type: (_) @bind.type))))
(short_var_declaration
  left: (expression_list . (identifier) @bind.var)
  right: (expression_list . (call_expression function: (_) @bind.call)))
(short_var_declaration
  left: (expression_list . (identifier) @bind.var)
  right: (expression_list . (identifier) @bind.alias))
