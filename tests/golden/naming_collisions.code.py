


def forward(self, x):
    add = torch.relu(x);  x = None
    add_1 = torch.relu(add);  add = None
    add_2 = torch.relu(add_1);  add_1 = None
    add_3 = torch.relu(add_2);  add_2 = None
    x_1 = torch.relu(add_3);  add_3 = None
    x_2 = torch.relu(x_1);  x_1 = None
    x_3 = torch.relu(x_2);  x_2 = None
    _1abc = torch.relu(x_3);  x_3 = None
    foo_bar = torch.relu(_1abc);  _1abc = None
    linear_weight = torch.relu(foo_bar);  foo_bar = None
    input_1 = torch.relu(linear_weight);  linear_weight = None
    list_1 = torch.relu(input_1);  input_1 = None
    sum_1 = torch.relu(list_1);  list_1 = None
    class_1 = torch.relu(sum_1);  sum_1 = None
    torch_1 = torch.relu(class_1);  class_1 = None
    inf_1 = torch.relu(torch_1);  torch_1 = None
    a_b_c = torch.relu(inf_1);  inf_1 = None
    add_4 = torch.relu(a_b_c);  a_b_c = None
    getattr_1 = torch.relu(add_4);  add_4 = None
    Foo = torch.relu(getattr_1);  getattr_1 = None
    MyLayer = torch.relu(Foo);  Foo = None
    nan_1 = torch.relu(MyLayer);  MyLayer = None
    device_1 = torch.relu(nan_1);  nan_1 = None
    print_1 = torch.relu(device_1);  device_1 = None
    self = torch.relu(print_1);  print_1 = None
    _ = torch.relu(self);  self = None
    return _
    