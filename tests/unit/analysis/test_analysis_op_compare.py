

def test_an_op_outside_the_layers_is_shown_without_tensorflows_function_call_scopes() -> None:
    from fp16doctor.analysis.op_compare import shown_name

    assert shown_name("StatefulPartitionedCall/adam/Square_2") == "adam/Square_2"
    assert shown_name("PartitionedCall_1/StatefulPartitionedCall/Cast_20") == "Cast_20"
    assert shown_name("Iterator::Root::Prefetch") == "Iterator::Root::Prefetch"
