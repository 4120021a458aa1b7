; TypeScript and TSX definitions, identifier occurrences and imports (codewell codenav).
(function_declaration name: (identifier) @name) @definition.function
(generator_function_declaration name: (identifier) @name) @definition.function
(function_signature name: (identifier) @name) @definition.function
(class_declaration name: (type_identifier) @name) @definition.class
(abstract_class_declaration name: (type_identifier) @name) @definition.class
(interface_declaration name: (type_identifier) @name) @definition.interface
(type_alias_declaration name: (type_identifier) @name) @definition.type_alias
(enum_declaration name: (identifier) @name) @definition.enum
(enum_body [(property_identifier) @name (enum_assignment name: (property_identifier) @name)] @definition.constant)
(internal_module name: (identifier) @name) @definition.module
(module name: (identifier) @name) @definition.module
(method_definition name: [(property_identifier) (private_property_identifier)] @name) @definition.method
(method_signature name: (property_identifier) @name) @definition.method
(abstract_method_signature name: (property_identifier) @name) @definition.method
(property_signature name: (property_identifier) @name) @definition.field
(public_field_definition name: [(property_identifier) (private_property_identifier)] @name) @definition.field
(variable_declarator name: (identifier) @name value: [(arrow_function) (function_expression) (generator_function)]) @definition.function
(program (lexical_declaration (variable_declarator name: (identifier) @name) @definition.variable))
(program (variable_declaration (variable_declarator name: (identifier) @name) @definition.variable))
(program (export_statement declaration: (lexical_declaration (variable_declarator name: (identifier) @name) @definition.variable)))
(program (export_statement declaration: (variable_declaration (variable_declarator name: (identifier) @name) @definition.variable)))
(program (ambient_declaration (lexical_declaration (variable_declarator name: (identifier) @name) @definition.variable)))
(program (ambient_declaration (variable_declaration (variable_declarator name: (identifier) @name) @definition.variable)))
; The members of a default-exported object (`export default { invalid_binding: (x) => ... }`), reached as `errors.name`.
(export_statement value: (object (pair key: (property_identifier) @name) @definition.field))
(identifier) @reference
(property_identifier) @reference
(private_property_identifier) @reference
(shorthand_property_identifier) @reference
(shorthand_property_identifier_pattern) @reference
(type_identifier) @reference
(import_statement) @import
(export_statement source: (string)) @import
(lexical_declaration (variable_declarator value: (call_expression function: (identifier) @_req arguments: (arguments (string))))
  (#eq? @_req "require")) @import
(lexical_declaration (variable_declarator value: (member_expression object: (call_expression function: (identifier) @_req arguments: (arguments (string)))))
  (#eq? @_req "require")) @import
(variable_declaration (variable_declarator value: (member_expression object: (call_expression function: (identifier) @_req arguments: (arguments (string)))))
  (#eq? @_req "require")) @import
