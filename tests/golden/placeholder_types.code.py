


def forward(self, x : torch.Tensor, n : int, f : float = 1.5, ys : typing_List[torch.Tensor], tup : typing_Tuple[torch.Tensor,int], d : typing_Dict[str,torch.Tensor]) -> typing_Tuple[torch.Tensor,int]:
    w : torch.Tensor = self.w
    add : torch.Tensor = x + n;  x = n = None
    mul = add.mul(f);  add = f = None
    getitem = ys[0];  ys = None
    getitem_1 = tup[1];  tup = None
    getitem_2 = d['k'];  d = None
    return (mul, getitem, getitem_1, getitem_2, w)
    