"""A typical TF-style program (tape, ops, Variables, a Keras layer and optimizer, tf.function, tf.data).

tests/test_stubs.py type-checks it with mypy and with pyright (basedpyright, pyright's standard
mode) from outside the repository, as a user's project would: zero errors expected."""

import numpy as np

import tapejax as tf

w = tf.Variable(tf.random.normal((3, 1)), name="w")
b = tf.Variable(tf.zeros((1,)))
x = tf.constant(np.ones((4, 3), np.float32))
y = tf.constant(np.zeros((4, 1), np.float32))
opt = tf.keras.optimizers.SGD(learning_rate=0.1)
layer = tf.keras.layers.Dense(2, activation="relu")


@tf.function
def step(x: tf.Tensor, y: tf.Tensor) -> tf.Tensor:
    with tf.GradientTape() as tape:
        pred = tf.matmul(x, w) + b
        loss = tf.reduce_mean(tf.square(pred - y)) + tf.math.reduce_sum(layer(x)) * 0.0
    grads = tape.gradient(loss, [w, b])
    opt.apply_gradients(zip(grads, [w, b]))
    return loss


loss = step(x, y)
for _ in range(2):
    loss = step(x, y)
print(float(loss.numpy()), w.numpy().shape, x.shape, x.dtype, tf.nn.relu(x)[0, 1])
ds = tf.data.Dataset.from_tensor_slices((np.ones((8, 3), np.float32), np.zeros((8, 1), np.float32))).batch(4)
for xb, yb in ds:
    print(step(xb, yb))
