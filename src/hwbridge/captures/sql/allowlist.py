"""What model-written SQL may call: the functions an analyst of recorded buses needs, by name.

An allow-list, not a deny-list: a DuckDB release that adds a function that reads settings, files
or the catalog adds nothing here. The names are DuckDB's own (operators included, as the parser
spells them: `~~` is LIKE, `date_part` is EXTRACT). Functions that make a huge value out of a
small argument (`repeat`, `lpad`, `format`), compare strings in quadratic memory
(`damerau_levenshtein`), read the session (`current_setting`, `version`, `getvariable`) or have
effects (`nextval`, `setseed`, `write_log`, `sleep_ms`) are left out on purpose.
"""

from __future__ import annotations

__all__ = ["ALLOWED_FUNCTIONS", "ALLOWED_PLAN_FUNCTIONS", "ALLOWED_TABLE_FUNCTIONS"]

_OPERATORS = """
+ - * / // % ** ^ || & | << >> ~ @ = != < <= > >= ~~ !~~ ~~* !~~* ~~~ ^@ && @> <@
"""

_AGGREGATES = """
any_value approx_count_distinct approx_quantile arbitrary arg_max arg_max_null arg_min
arg_min_null argmax argmin array_agg avg bit_and bit_or bit_xor bool_and bool_or corr count
count_if count_star countif covar_pop covar_samp entropy favg first fsum geomean geometric_mean
group_concat histogram kahan_sum kurtosis kurtosis_pop last list listagg mad max max_by mean
median min min_by mode product quantile quantile_cont quantile_disc regr_avgx regr_avgy
regr_count regr_intercept regr_r2 regr_slope regr_sxx regr_sxy regr_syy sem skewness stddev
stddev_pop stddev_samp string_agg sum sumkahan var_pop var_samp variance wavg weighted_avg
"""

_WINDOW = """
row_number rank dense_rank rank_dense percent_rank cume_dist ntile lag lead first_value
last_value nth_value fill
"""

_MATH = """
abs acos acosh asin asinh atan atan2 atanh cbrt ceil ceiling cos cosh cot degrees even exp
factorial floor fmod gamma gcd greatest greatest_common_divisor isfinite isinf isnan lcm
least least_common_multiple lgamma ln log log10 log2 mod nextafter pi pow power radians random
round round_even roundbankers sign signbit sin sinh sqrt tan tanh trunc add subtract multiply
divide fdiv xor bit_count equi_width_bins
"""

_STRINGS = """
ascii bit_length char_length character_length chr concat concat_ws contains ends_with hex
ilike_escape instr lcase left length len like_escape lower ltrim md5 not_ilike_escape
not_like_escape octet_length ord position prefix regexp_escape regexp_extract
regexp_extract_all regexp_full_match regexp_matches regexp_replace regexp_split_to_array replace
reverse right rtrim split split_part starts_with str_split str_split_regex string_split
string_split_regex string_to_array strip_accents strlen strpos substr substring suffix to_hex
translate trim ucase unhex unicode upper nfc_normalize from_hex get_bit to_base bin
"""

_TIME = """
age century date_add date_diff date_part date_sub date_trunc datediff datepart datesub
datetrunc day dayname dayofmonth dayofweek dayofyear decade epoch epoch_ms epoch_ns epoch_us
era hour isodow isoyear julian last_day make_date make_time make_timestamp make_timestamp_ms
make_timestamp_ns make_timestamptz microsecond millennium millisecond minute month monthname
nanosecond quarter second strftime strptime time_bucket timezone timezone_hour timezone_minute
to_centuries to_days to_decades to_hours to_microseconds to_millennia to_milliseconds
to_minutes to_months to_quarters to_seconds to_timestamp to_weeks to_years today now
try_strptime week weekday weekofyear year yearweek get_current_time get_current_timestamp
current_date transaction_timestamp
"""

_LISTS_AND_STRUCTS = """
apply array_aggr array_aggregate array_apply array_cat array_concat array_contains
array_distinct array_extract array_filter array_has array_has_all array_has_any array_indexof
array_length array_position array_reduce array_reverse_sort array_select array_slice
array_sort array_transform array_unique array_value array_where array_zip cardinality
element_at filter flatten generate_series list_aggr list_aggregate list_any_value list_apply
list_avg list_bool_and list_bool_or list_cat list_concat list_contains list_count
list_distinct list_element list_extract list_filter list_first list_grade_up list_has
list_has_all list_has_any list_indexof list_last list_max list_median list_min list_mode
list_pack list_position list_product list_reduce list_reverse_sort list_select list_slice
list_sort list_stddev_pop list_stddev_samp list_string_agg list_sum list_transform list_unique
list_value list_var_pop list_var_samp list_where list_zip map map_concat map_contains
map_entries map_extract map_extract_value map_from_entries map_keys map_values range reduce
row struct_extract struct_extract_at struct_insert struct_keys struct_pack struct_values unnest
grade_up list_resize array_resize
"""

_CONDITIONALS = """
if nullif typeof hash
"""

ALLOWED_FUNCTIONS = frozenset(
    name.lower()
    for group in (
        _OPERATORS,
        _AGGREGATES,
        _WINDOW,
        _MATH,
        _STRINGS,
        _TIME,
        _LISTS_AND_STRUCTS,
        _CONDITIONALS,
    )
    for name in group.split()
)

# functions in FROM: rows out of nothing, never out of a file or the catalog
ALLOWED_TABLE_FUNCTIONS = frozenset({"range", "generate_series", "unnest"})

# the scans DuckDB's bound plan may hold: the dataset's Arrow tables and the table functions above
ALLOWED_PLAN_FUNCTIONS = frozenset({"PYTHON_ARROW_SCAN", "RANGE", "GENERATE_SERIES", "UNNEST"})
