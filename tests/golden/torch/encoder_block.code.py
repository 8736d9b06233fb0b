
torch.fx._symbolic_trace.wrap("math_sqrt")

def forward(self, x):
    size = x.size(0)
    size_1 = x.size(1)
    size_2 = x.size(2)
    floordiv = size_2 // 4
    ln1 = self.ln1(x)
    qkv = self.qkv(ln1);  ln1 = None
    view = qkv.view(size, size_1, 3, 4, floordiv);  qkv = None
    permute = view.permute(2, 0, 3, 1, 4);  view = None
    getitem = permute[0]
    getitem_1 = permute[1]
    getitem_2 = permute[2];  permute = None
    transpose = getitem_1.transpose(-2, -1);  getitem_1 = None
    matmul = torch.matmul(getitem, transpose);  getitem = transpose = None
    sqrt = math_sqrt(floordiv);  floordiv = None
    truediv = 1.0 / sqrt;  sqrt = None
    mul = matmul * truediv;  matmul = truediv = None
    softmax = mul.softmax(dim = -1);  mul = None
    drop = self.drop(softmax);  softmax = None
    matmul_1 = torch.matmul(drop, getitem_2);  drop = getitem_2 = None
    transpose_1 = matmul_1.transpose(1, 2);  matmul_1 = None
    reshape = transpose_1.reshape(size, size_1, size_2);  transpose_1 = size = size_1 = size_2 = None
    proj = self.proj(reshape);  reshape = None
    add = x + proj;  x = proj = None
    ln2 = self.ln2(add)
    fc1 = self.fc1(ln2);  ln2 = None
    act = self.act(fc1);  fc1 = None
    fc2 = self.fc2(act);  act = None
    add_1 = add + fc2;  add = fc2 = None
    return add_1
    