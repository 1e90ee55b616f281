; Definitions: @def.<kind> on the definition, @name on its name.
(class_declaration name: (identifier) @name) @def.class
(record_declaration name: (identifier) @name) @def.class
(interface_declaration name: (identifier) @name) @def.interface
(annotation_type_declaration name: (identifier) @name) @def.interface
(enum_declaration name: (identifier) @name) @def.enum
(method_declaration name: (identifier) @name) @def.method
(constructor_declaration name: (identifier) @name) @def.method

; Inheritance: extends and implements.
(class_declaration superclass: (superclass (_) @inherit.base)) @inherit.owner
(class_declaration interfaces: (super_interfaces (type_list (_) @inherit.base))) @inherit.owner
(enum_declaration interfaces: (super_interfaces (type_list (_) @inherit.base))) @inherit.owner
(record_declaration interfaces: (super_interfaces (type_list (_) @inherit.base))) @inherit.owner
(interface_declaration (extends_interfaces (type_list (_) @inherit.base))) @inherit.owner

(package_declaration [(identifier) (scoped_identifier)] @package)
(import_declaration) @import

; Call sites: @callee is the method name; the receiver is read from the invocation.
(method_invocation name: (identifier) @callee) @call
(object_creation_expression type: (_) @callee) @call

; Type facts: locals, parameters, fields.
(local_variable_declaration type: (_) @bind.type declarator: (variable_declarator name: (identifier) @bind.var))
(local_variable_declaration declarator: (variable_declarator
  name: (identifier) @bind.var value: (object_creation_expression type: (_) @bind.type)))
(formal_parameter type: (_) @bind.type name: (identifier) @bind.var)
(field_declaration type: (_) @bind.type declarator: (variable_declarator name: (identifier) @bind.var))
(enhanced_for_statement type: (_) @bind.type name: (identifier) @bind.var)
