import LoopKit
print("loop-demo")
