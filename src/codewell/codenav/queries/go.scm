; Go definitions, identifier occurrences, imports and the package clause (codewell codenav).
(function_declaration name: (identifier) @name) @definition.function
(method_declaration
  receiver: (parameter_list (parameter_declaration type: [(type_identifier) @container
                                                           (pointer_type (type_identifier) @container)
                                                           (generic_type type: (type_identifier) @container)
                                                           (pointer_type (generic_type type: (type_identifier) @container))]))
  name: (field_identifier) @name) @definition.method
(type_spec name: (type_identifier) @name type: (struct_type)) @definition.struct
(type_spec name: (type_identifier) @name type: (interface_type)) @definition.interface
(type_spec name: (type_identifier) @name) @definition.type_alias
(type_alias name: (type_identifier) @name) @definition.type_alias
(field_declaration name: (field_identifier) @name) @definition.field
(method_elem name: (field_identifier) @name) @definition.method
(source_file (const_declaration (const_spec name: (identifier) @name) @definition.constant))
(source_file (var_declaration (var_spec name: (identifier) @name) @definition.variable))
(identifier) @reference
(type_identifier) @reference
(field_identifier) @reference
(package_identifier) @reference
(import_declaration) @import
(package_clause (package_identifier) @package)
