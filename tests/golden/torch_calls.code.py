


def forward(self, x, w, b):
    relu = torch.relu(x);  x = None
    sum_1 = torch.sum(relu, dim = -1, keepdim = True);  relu = None
    relu_1 = torch.nn.functional.relu(sum_1, inplace = False);  sum_1 = None
    linear = torch._C._nn.linear(relu_1, w, b);  relu_1 = b = None
    gelu = torch._C._nn.gelu(linear);  linear = None
    split = torch.functional.split(gelu, 2);  gelu = None
    getitem = split[0];  split = None
    layer_norm = torch.nn.functional.layer_norm(getitem, (4,));  getitem = None
    topk = torch.topk(layer_norm, 3);  layer_norm = None
    getitem_1 = topk[0];  topk = None
    cat = torch.cat([getitem_1, getitem_1], dim = 0);  getitem_1 = None
    softmax = torch.nn.functional.softmax(cat, dim = -1);  cat = None
    matmul = torch.matmul(softmax, w);  softmax = w = None
    return matmul
    