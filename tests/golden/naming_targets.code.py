


def forward(self, input, list, self_):
    input_1 = input
    list_1 = list
    add = input_1.__add__(list_1);  input_1 = list_1 = None
    my_layer = self.MyLayer(add);  add = None
    all_caps = self.ALL_CAPS(my_layer);  my_layer = None
    conv2d = self.Conv2D(all_caps);  all_caps = None
    layer1block = self.layer1Block(conv2d);  conv2d = None
    foo_bar_baz_qux = self.fooBar.BazQux(layer1block);  layer1block = None
    linear_weight = self.linear.weight
    sum_1 = torch.sum(foo_bar_baz_qux);  foo_bar_baz_qux = None
    max_1 = sum_1.max();  sum_1 = None
    getattr_1 = max_1.shape
    pow_1 = max_1 ** 2;  max_1 = None
    and_ = pow_1 & self_;  pow_1 = self_ = None
    _threshold = torch.nn.functional._threshold(and_, 0.5, 0.0);  and_ = None
    return (getattr_1, _threshold, linear_weight)
    