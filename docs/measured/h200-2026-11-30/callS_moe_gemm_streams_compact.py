import torch,json,sys,statistics as S
t=torch;B=t.bfloat16;D="cuda"
C=[("oss",2880,2880,16,r) for r in(256,1024,2048,4096,8192)]+[("q30",2048,768,16,r) for r in(256,1024,2048,4096,8192)]+[("q235",4096,1536,16,r) for r in(1024,2048)]+[("q235",4096,1536,4,r) for r in(4096,8192)]+[("dsv3",7168,2048,32,r) for r in(256,1024,2048)]+[("dsv3",7168,2048,8,r) for r in(1024,8192)]
St=[t.cuda.Stream(priority=-1) for _ in range(4)];F=t.cuda.Event();J=[t.cuda.Event() for _ in range(4)]
def ms(P,O):
 c=t.cuda.current_stream();F.record(c);u=min(4,len(P))
 for s in St[:u]:s.wait_event(F)
 for i,(a,b) in enumerate(P):
  with t.cuda.stream(St[i%4]):t.mm(a,b,out=O[i])
 for s,e in zip(St[:u],J):e.record(s);c.wait_event(e)
def tm(f):
 for _ in range(3):f()
 t.cuda.synchronize();z=[]
 for _ in range(10):
  a=t.cuda.Event(enable_timing=True);b=t.cuda.Event(enable_timing=True);a.record();f();b.record();b.synchronize();z.append(a.elapsed_time(b)*1e-3)
 return S.median(z)
R=[]
for m,h,f,E,r in C:
 T=E*r;o=t.arange(1,E+1,device=D,dtype=t.int32)*r
 for nm,k,n in(("fc1",h,2*f),("fc2",f,h)):
  x=t.randn(T,k,device=D,dtype=B);y=t.randn(T,n,device=D,dtype=B);w=t.randn(E,n,k,device=D,dtype=B)
  xs=[x[i*r:(i+1)*r] for i in range(E)];ys=[y[i*r:(i+1)*r] for i in range(E)]
  for p,P,sh,g,d in(("fwd",[(xs[i],w[i].t()) for i in range(E)],(r,n),lambda:t._grouped_mm(x,w.transpose(-2,-1),offs=o),lambda:t.mm(x,w[0].t())),("dgrad",[(ys[i],w[i]) for i in range(E)],(r,k),None,lambda:t.mm(y,w[0])),("wgrad",[(ys[i].t(),xs[i]) for i in range(E)],(n,k),None,lambda:t.mm(y.t(),x))):
   O=[t.empty(sh,device=D,dtype=B) for _ in range(E)];q=dict(m=m,E=E,r=r,g=nm,p=p,h=h,f=f)
   q["loop1"]=tm(lambda:[t.mm(a,b,out=u) for(a,b),u in zip(P,O)]);q["loop4"]=tm(lambda:ms(P,O));q["dense"]=tm(d)
   if g:q["grouped"]=tm(g)
   try:
    t.cuda.synchronize();G=t.cuda.CUDAGraph()
    with t.cuda.graph(G):ms(P,O)
    q["graph4"]=tm(G.replay)
   except Exception as e:q["gerr"]=str(e)[:150]
   R.append(q)
  del x,y,w,xs,ys,O
 t.cuda.empty_cache();print(m,E,r,{k:round(2*T*h*2*f/v/1e12) for k,v in R[-6].items() if k in("loop1","loop4","graph4","dense","grouped")},file=sys.stderr,flush=True)
 json.dump(R,open(sys.argv[1],"w"))
