; JavaScript definitions, identifier occurrences and imports (import and require) (codewell codenav).
(function_declaration name: (identifier) @name) @definition.function
(generator_function_declaration name: (identifier) @name) @definition.function
(class_declaration name: (identifier) @name) @definition.class
(method_definition name: [(property_identifier) (private_property_identifier)] @name) @definition.method
(field_definition property: [(property_identifier) (private_property_identifier)] @name) @definition.field
(variable_declarator name: (identifier) @name value: [(arrow_function) (function_expression) (generator_function)]) @definition.function
(variable_declarator name: (identifier) @name value: (class)) @definition.class
(program (lexical_declaration (variable_declarator name: (identifier) @name) @definition.variable))
(program (variable_declaration (variable_declarator name: (identifier) @name) @definition.variable))
(program (export_statement (lexical_declaration (variable_declarator name: (identifier) @name) @definition.variable)))
(program (export_statement (variable_declaration (variable_declarator name: (identifier) @name) @definition.variable)))
(assignment_expression
  left: (member_expression object: (member_expression object: (identifier) @_module property: (property_identifier) @_exports)
                           property: (property_identifier) @name)
  right: [(arrow_function) (function_expression)]
  (#eq? @_module "module") (#eq? @_exports "exports")) @definition.function
(assignment_expression
  left: (member_expression object: (identifier) @_exports property: (property_identifier) @name)
  right: [(arrow_function) (function_expression)]
  (#eq? @_exports "exports")) @definition.function
; The members of a default-exported object (`export default { invalid_binding: (x) => ... }`), reached as `errors.name`.
(export_statement value: (object (pair key: (property_identifier) @name) @definition.field))
(identifier) @reference
(property_identifier) @reference
(private_property_identifier) @reference
(shorthand_property_identifier) @reference
(shorthand_property_identifier_pattern) @reference
(import_statement) @import
(export_statement source: (string)) @import
(lexical_declaration (variable_declarator value: (call_expression function: (identifier) @_req arguments: (arguments (string))))
  (#eq? @_req "require")) @import
(variable_declaration (variable_declarator value: (call_expression function: (identifier) @_req arguments: (arguments (string))))
  (#eq? @_req "require")) @import
(lexical_declaration (variable_declarator value: (member_expression object: (call_expression function: (identifier) @_req arguments: (arguments (string)))))
  (#eq? @_req "require")) @import
(variable_declaration (variable_declarator value: (member_expression object: (call_expression function: (identifier) @_req arguments: (arguments (string)))))
  (#eq? @_req "require")) @import
