; PHP definitions, identifier occurrences, `use` and include/require (codewell codenav).
(function_definition name: (name) @name) @definition.function
(class_declaration name: (name) @name) @definition.class
(interface_declaration name: (name) @name) @definition.interface
(trait_declaration name: (name) @name) @definition.class
(enum_declaration name: (name) @name) @definition.enum
(enum_case name: (name) @name) @definition.constant
(method_declaration name: (name) @name) @definition.method
(property_declaration (property_element (variable_name (name) @name))) @definition.field
(const_declaration (const_element (name) @name)) @definition.constant
(namespace_definition name: (namespace_name) @name) @definition.module
(name) @reference
(namespace_use_declaration) @import
(include_expression) @import
(include_once_expression) @import
(require_expression) @import
(require_once_expression) @import
