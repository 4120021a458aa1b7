; Python definitions, identifier occurrences and imports (codewell codenav).
; Captures: @definition.<kind> on the whole definition with @name on its name; @reference on every identifier
; (comments and strings hold none); @import on import statements.
(class_definition name: (identifier) @name) @definition.class
(function_definition name: (identifier) @name) @definition.function
; Every assignment to a name defines it; the enclosing definitions tell a module variable (no container), a class
; attribute (a field) and a local variable (container: the function) apart.
(assignment left: (identifier) @name) @definition.variable
(assignment left: (pattern_list (identifier) @name)) @definition.variable
; Parameters and other local bindings, so that a name used in a function finds its own binding first.
((parameters (identifier) @name @definition.variable) (#not-match? @name "^(self|cls)$"))
(default_parameter name: (identifier) @name @definition.variable)
(typed_parameter (identifier) @name @definition.variable)
(typed_default_parameter name: (identifier) @name @definition.variable)
(for_statement left: (identifier) @name @definition.variable)
(for_statement left: (pattern_list (identifier) @name @definition.variable))
(for_in_clause left: (identifier) @name @definition.variable)
(for_in_clause left: (pattern_list (identifier) @name @definition.variable))
(as_pattern alias: (as_pattern_target (identifier) @name @definition.variable))
(function_definition name: (identifier) @_init (#eq? @_init "__init__")
  body: (block (assignment left: (attribute object: (identifier) @_self attribute: (identifier) @name)) @definition.field))
(identifier) @reference
(import_statement) @import
(import_from_statement) @import
(future_import_statement) @import
