; Kotlin definitions, identifier occurrences, imports and the package header (codewell codenav).
; The grammar has no field names: `interface` and enum bodies tell the class kinds apart.
(class_declaration "interface" (type_identifier) @name) @definition.interface
(class_declaration (type_identifier) @name (enum_class_body)) @definition.enum
(class_declaration (type_identifier) @name) @definition.class
(object_declaration (type_identifier) @name) @definition.class
(companion_object (type_identifier) @name) @definition.class
(function_declaration (simple_identifier) @name) @definition.function
(property_declaration (variable_declaration (simple_identifier) @name)) @definition.variable
(class_parameter (binding_pattern_kind) (simple_identifier) @name) @definition.field
(enum_entry (simple_identifier) @name) @definition.constant
(type_alias (type_identifier) @name) @definition.type_alias
(simple_identifier) @reference
(type_identifier) @reference
(import_header) @import
(package_header (identifier) @package)
