; Patterns JavaScript and TypeScript share (their grammars name these nodes alike).

; A function assigned to a property at the top of a module: `res.sendFile = function sendFile() {}`,
; `Router.prototype.route = function () {}`, `exports.parse = () => {}` (@owner: what it is set on).
(program
  (expression_statement
    (assignment_expression
      left: (member_expression object: (_) @owner property: (property_identifier) @name)
      right: [(function_expression) (arrow_function) (generator_function)]) @def.method))
; The same under an alias, `res.contentType = res.type = function contentType() {}`: named as the
; function's own assignment names it.
(program
  (expression_statement
    (assignment_expression
      right: (assignment_expression
        left: (member_expression object: (_) @owner property: (property_identifier) @name)
        right: [(function_expression) (arrow_function) (generator_function)]) @def.method)))

; A module-level name bound to another one (`export const persist = persistImpl as unknown as Persist`,
; `const run = main`): another name for that definition, when it is one.
(program (lexical_declaration (variable_declarator name: (identifier) @alias.name value: (_) @alias.value)))
(program (export_statement (lexical_declaration (variable_declarator name: (identifier) @alias.name value: (_) @alias.value))))
