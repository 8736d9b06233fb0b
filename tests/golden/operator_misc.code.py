


def forward(self, x, y):
    abs_1 = _operator_abs(x);  x = None
    not_ = _operator_not_(abs_1);  abs_1 = None
    truth = _operator_truth(not_);  not_ = None
    contains = _operator_contains(y, truth);  truth = None
    concat = _operator_concat(y, [contains]);  contains = None
    index = _operator_index(concat);  concat = None
    getitem = y[index];  y = index = None
    return getitem
    